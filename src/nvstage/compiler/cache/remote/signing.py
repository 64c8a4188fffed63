"""Signed remote entries: Ed25519 (the ``cryptography`` package), so that only a holder of the
private key can write an entry a signature-requiring reader accepts.

The local cache's seal (``fsio.seal`` under ``store/secret.py``'s secret) is an HMAC under a
per-user key: it finds damage and forgery in one user's folder, but a key every CI job held
would let any job (a pull request's too) forge entries. A remote tier is shared, so its entries
carry a signature instead: writers (trusted CI on the main branch) hold the private key, readers
only the public one. Neither a job that can only read nor anyone with write access to the server
can make an entry such a reader accepts.

What is signed: a domain string, the object's kind and name (its key) and the whole body, so an
entry cannot be replayed under another key. The signature travels with the public key that
made it (32 bytes), so a reader trusting several keys (a rotation) knows which to check.

Keys come from the environment only (``spec.py`` names the variables), never from the
repository, which a pull request controls:

- a private key: a file in PEM (PKCS#8, ``openssl genpkey -algorithm ed25519``) or OpenSSH
  (``ssh-keygen -t ed25519 -N ''``) form;
- public keys: each given inline or as a file, as PEM (``openssl pkey -pubout``), an OpenSSH
  line (``ssh-ed25519 AAAA...``) or the raw 32 bytes in base64 or hex.
"""

from __future__ import annotations

import base64
import binascii
import os

from nvstage.errors import RemoteCacheError, NvstageError
from nvstage.extras import REMOTE

DOMAIN = b"nvstage remote cache entry/1\0"
SIG_BYTES = 64
PUB_BYTES = 32
_MAX_KEY_FILE = 64 << 10


def _crypto():
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise RemoteCacheError(
            "signed remote entries need the 'cryptography' package",
            hint=REMOTE) from None
    return ed25519, serialization, InvalidSignature


def message(kind: str, name: str, body: bytes) -> bytes:
    """What a signature covers."""
    return DOMAIN + kind.encode() + b"\0" + name.encode() + b"\0" + body


def _read_key_file(path: str, what: str) -> bytes:
    """A key file's bytes, read as every file nvstage is given is (a regular file within a
    bound: a FIFO or a device named by mistake is refused, not waited on)."""
    from nvstage.files import read_regular

    try:
        return read_regular(path, limit=_MAX_KEY_FILE, limit_name="a key file's bound",
                            what=what)
    except NvstageError as e:
        raise RemoteCacheError(f"the {what}: {e.message}") from None


class Signer:
    """A private key: signs what this job writes."""

    def __init__(self, private):
        self._key = private
        ed25519, serialization, _ = _crypto()
        self.public = private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw)

    @classmethod
    def from_file(cls, path: str) -> Signer:
        """Raises ``RemoteCacheError`` (never showing the key's bytes)."""
        ed25519, serialization, _ = _crypto()
        data = _read_key_file(path, "signing key")
        key = None
        for load in (lambda d: serialization.load_pem_private_key(d, password=None),
                     lambda d: serialization.load_ssh_private_key(d, password=None)):
            try:
                key = load(data)
                break
            except Exception:  # noqa: BLE001 - any parse failure: the next form
                continue
        if not isinstance(key, ed25519.Ed25519PrivateKey):
            raise RemoteCacheError(
                f"the signing key {path} is not an unencrypted Ed25519 private key "
                "(PEM or OpenSSH)",
                hint="make one with: openssl genpkey -algorithm ed25519 -out KEY")
        return cls(key)

    def sign(self, kind: str, name: str, body: bytes) -> bytes:
        return self._key.sign(message(kind, name, body))


class Verifier:
    """The public keys a reader trusts."""

    def __init__(self, publics: list[bytes]):
        self.keys = {p: None for p in publics}

    @classmethod
    def from_text(cls, text: str) -> Verifier:
        """Public keys separated by commas or new lines, each inline or a file's path.
        Raises ``RemoteCacheError``."""
        publics = []
        # PEM blocks hold new lines themselves: split them out first.
        rest = text
        while "-----BEGIN" in rest:
            start = rest.index("-----BEGIN")
            end = rest.find("-----END", start)
            end = rest.find("-----", end + 8) + 5 if end >= 0 else len(rest)
            publics.append(_public(rest[start:end]))
            rest = rest[:start] + "," + rest[end:]
        for item in rest.replace("\n", ",").split(","):
            item = item.strip()
            if item:
                publics.append(_public(item))
        if not publics:
            raise RemoteCacheError("no public key given")
        return cls(publics)

    def add(self, public: bytes) -> None:
        self.keys[public] = None

    def verify(self, kind: str, name: str, body: bytes, public: bytes, sig: bytes) -> bool:
        if public not in self.keys:
            return False
        ed25519, _, invalid = _crypto()
        key = self.keys[public]
        if key is None:
            try:
                key = self.keys[public] = ed25519.Ed25519PublicKey.from_public_bytes(public)
            except ValueError:
                return False
        try:
            key.verify(sig, message(kind, name, body))
            return True
        except invalid:
            return False


def _public(item: str) -> bytes:
    """One public key as 32 raw bytes: inline (PEM, OpenSSH line, base64 or hex of the raw
    key) or the path of a file holding one."""
    got = _parse_public(item)
    if got is None and os.path.isfile(item):
        got = _parse_public(_read_key_file(item, "public key").decode(errors="replace").strip())
    if got is None:
        shown = item if len(item) <= 60 else item[:57] + "..."
        raise RemoteCacheError(f"not an Ed25519 public key: {shown}",
                               hint="give PEM (openssl pkey -pubout), an 'ssh-ed25519 ...' "
                                    "line, or the raw 32 bytes in base64 or hex")
    return got


def _parse_public(text: str) -> bytes | None:
    ed25519, serialization, _ = _crypto()
    key = None
    try:
        if text.startswith("-----BEGIN"):
            key = serialization.load_pem_public_key(text.encode())
        elif text.startswith("ssh-ed25519 "):
            key = serialization.load_ssh_public_key(text.encode())
        else:
            try:
                raw = bytes.fromhex(text)
            except ValueError:
                raw = base64.b64decode(text, validate=True)
            return raw if len(raw) == PUB_BYTES else None
    except (ValueError, TypeError, binascii.Error):
        return None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        return None
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def new_key_pair() -> tuple[bytes, str]:
    """(a private key as PEM, its public key as one OpenSSH line): for ``nvstage cache``."""
    ed25519, serialization, _ = _crypto()
    key = ed25519.Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    pub = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                        serialization.PublicFormat.OpenSSH).decode()
    return pem, pub
