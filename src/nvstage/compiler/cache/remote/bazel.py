"""Bazel's ActionResult, the few fields the HTTP tier's ``bazel`` layout writes and reads.

build.bazel.remote.execution.v2: ActionResult { repeated OutputFile output_files = 2;
int32 exit_code = 4; } OutputFile { string path = 1; Digest digest = 2; }
Digest { string hash = 1; int64 size_bytes = 2; }. The protobuf wire format is encoded and
decoded here by hand: a dependency for five fields would cost every build its import.
"""

from __future__ import annotations

# build.bazel.remote.execution.v2: ActionResult { repeated OutputFile output_files = 2;
# int32 exit_code = 4; } OutputFile { string path = 1; Digest digest = 2; }
# Digest { string hash = 1; int64 size_bytes = 2; }
ENTRY_PATH = "nvstage-entry"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def action_result(sha: str, size: int) -> bytes:
    digest = _field(1, sha.encode()) + _varint(2 << 3) + _varint(size)
    return _field(2, _field(1, ENTRY_PATH.encode()) + _field(2, digest))


def _fields(data: bytes):
    """(field number, wire type, value) of a protobuf message; ValueError when malformed."""
    i = 0
    while i < len(data):
        key, i = _read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(data, i)
        elif wire == 2:
            length, i = _read_varint(data, i)
            if i + length > len(data):
                raise ValueError("truncated")
            value, i = data[i:i + length], i + length
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        else:
            raise ValueError("unknown wire type")
        yield number, wire, value


def _read_varint(data: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if i >= len(data) or shift > 63:
            raise ValueError("bad varint")
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def action_result_digest(data: bytes) -> tuple[str, int] | None:
    """The (sha256, size) of the entry an ActionResult of ours points at; None otherwise."""
    try:
        for number, wire, value in _fields(data):
            if number != 2 or wire != 2:
                continue
            path, sha, size = None, None, None
            for n2, w2, v2 in _fields(value):
                if n2 == 1 and w2 == 2:
                    path = v2.decode()
                elif n2 == 2 and w2 == 2:
                    for n3, w3, v3 in _fields(v2):
                        if n3 == 1 and w3 == 2:
                            sha = v3.decode()
                        elif n3 == 2 and w3 == 0:
                            size = v3
            if path == ENTRY_PATH and sha and len(sha) == 64 and size is not None:
                return sha, size
    except (ValueError, UnicodeDecodeError):
        return None
    return None
