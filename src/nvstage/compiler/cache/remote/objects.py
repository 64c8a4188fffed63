"""What a remote tier holds: an object per entry and per direct key's header sets, named by the
SHA-256 of its kind and key (``object_name``), packed as::

    NVSTAGE-REMOTE/1\\n  flags(1)  [public key(32) signature(64)]  zlib(header length(4),
    header JSON, blobs)

The header repeats what the local entry's document says (each file's hash, size and the sites
of the work folder's path; the printed text as pieces; see ``cache/local/entries.py``) and the
key, so an object cannot stand for another key; its blobs are the local entry's, cut at the work
folder. A reader checks every hash before an entry reaches its local folder, where it is sealed
with that user's key like any other. With signatures (``signing.py``), the signature covers the
kind, the key and the packed body; it is checked before anything is unpacked.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from collections.abc import Sequence

SCHEMA = "nvstage.remote/2"  # /2: entries record key digests and hold only some files
MAGIC = b"NVSTAGE-REMOTE/1\n"
_SIGNED = 1
MAX_OBJECT = 2 << 30
_LEVEL = 3  # zlib: objects and PTX shrink 3-5x at a fraction of level 9's time


class Rejected(Exception):
    """An object that is no entry this reader accepts (message: why)."""


def object_name(kind: str, key: str) -> str:
    return hashlib.sha256(f"{SCHEMA}/{kind}/{key}".encode()).hexdigest()


def pack(kind: str, key: str, doc: dict, blobs: Sequence[bytes], signer=None) -> bytes:
    header = json.dumps({"schema": SCHEMA, "kind": kind, "key": key,
                         "sizes": [len(b) for b in blobs], "doc": doc},
                        separators=(",", ":")).encode()
    z = zlib.compressobj(_LEVEL)
    body = z.compress(struct.pack(">I", len(header)) + header)
    for blob in blobs:
        body += z.compress(blob)
    body += z.flush()
    if signer is None:
        return MAGIC + bytes([0]) + body
    return MAGIC + bytes([_SIGNED]) + signer.public + signer.sign(kind, key, body) + body


def unpack(kind: str, key: str, data: bytes, verifier=None, require: bool = False,
           limit: int = MAX_OBJECT) -> tuple[dict, list[bytes]]:
    """(document, blobs) of an object ``pack`` made for this kind and key. Raises
    ``Rejected``: not ours, damaged, too large, or (``require``) not signed by a key the
    ``verifier`` trusts. The signature is checked before anything is decompressed."""
    from nvstage.compiler.cache.remote import signing

    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 1:
        raise Rejected("not an nvstage entry")
    flags = data[len(MAGIC)]
    at = len(MAGIC) + 1
    if flags & ~_SIGNED:
        raise Rejected("not an nvstage entry (unknown flags)")
    if flags & _SIGNED:
        public = data[at:at + signing.PUB_BYTES]
        sig = data[at + signing.PUB_BYTES:at + signing.PUB_BYTES + signing.SIG_BYTES]
        at += signing.PUB_BYTES + signing.SIG_BYTES
        body = data[at:]
        if verifier is not None and not verifier.verify(kind, key, body, public, sig):
            raise Rejected("signed by a key this reader does not trust, or not for this key")
    else:
        body = data[at:]
        if require:
            raise Rejected("unsigned, and this reader requires signatures")
    if require and verifier is None:
        raise Rejected("no public key to check signatures with")
    d = zlib.decompressobj()
    try:
        raw = d.decompress(body, limit + 1)
    except zlib.error:
        raise Rejected("damaged (not zlib data)") from None
    if len(raw) > limit or d.unconsumed_tail or not d.eof or d.unused_data:
        raise Rejected("damaged or too large")
    try:
        (n,) = struct.unpack(">I", raw[:4])
        header = json.loads(raw[4:4 + n])
        sizes = header["sizes"]
        if header.get("schema") != SCHEMA or header.get("kind") != kind or \
                header.get("key") != key or not isinstance(header.get("doc"), dict) or \
                not isinstance(sizes, list) or not all(type(s) is int and s >= 0
                                                       for s in sizes) or \
                4 + n + sum(sizes) != len(raw):
            raise Rejected("not the entry asked for, or damaged")
    except (struct.error, ValueError, KeyError, TypeError, RecursionError):
        raise Rejected("damaged (header)") from None
    blobs, at = [], 4 + n
    for s in sizes:
        blobs.append(raw[at:at + s])
        at += s
    return header["doc"], blobs
