"""The base every file of nvstage's own goes through: bounded reads, atomic writes, digests
and sealed documents."""

from __future__ import annotations

import hashlib
import hmac
import marshal
import os
import subprocess
import sys

import pytest

from nvstage import fsio


def test_read_bounded_takes_regular_files_within_the_bound(tmp_path):
    (tmp_path / "f").write_bytes(b"12345")
    assert fsio.read_bounded(tmp_path / "f", 5) == b"12345"
    with pytest.raises(fsio.TooLarge) as e:
        fsio.read_bounded(tmp_path / "f", 4)
    assert e.value.size == 5 and not e.value.grew
    os.mkfifo(tmp_path / "fifo")  # never waited on
    with pytest.raises(fsio.NotRegular):
        fsio.read_bounded(tmp_path / "fifo", 10)
    (tmp_path / "link").symlink_to(tmp_path / "f")
    with pytest.raises(OSError):  # not followed unless asked
        fsio.read_bounded(tmp_path / "link", 10)
    assert fsio.read_bounded(tmp_path / "link", 10, follow=True) == b"12345"
    with pytest.raises(fsio.NotRegular):
        fsio.read_bounded("/dev/zero", 10, follow=True)
    with pytest.raises(FileNotFoundError):
        fsio.read_bounded(tmp_path / "none", 10)
    for bad in ("fifo", "link", "none", "f\0"):  # a miss, never an error
        assert fsio.read_or_none(f"{tmp_path}/{bad}", 10) is None


def test_read_bounded_stops_at_the_bound_where_the_size_says_less(tmp_path):
    # /proc files say 0 bytes and hold more: read in steps, never past the bound.
    with pytest.raises(fsio.TooLarge) as e:
        fsio.read_bounded("/proc/self/maps", 8, follow=True)
    assert e.value.grew and e.value.size == 9
    assert fsio.read_bounded("/proc/self/maps", 1 << 24, follow=True)


def test_replace_is_whole_or_nothing_and_replaces_a_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"mine")
    (tmp_path / "doc").symlink_to(victim)
    fsio.replace(tmp_path / "doc", b"new")
    assert victim.read_bytes() == b"mine" and not (tmp_path / "doc").is_symlink()
    assert (tmp_path / "doc").read_bytes() == b"new"
    fsio.replace(tmp_path / "doc", b"newer", tmpdir=tmp_path, mode=0o600, sync=True)
    assert (tmp_path / "doc").read_bytes() == b"newer"
    assert os.stat(tmp_path / "doc").st_mode & 0o777 == 0o600
    with pytest.raises(OSError):
        fsio.replace(tmp_path / "no" / "doc", b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc", "victim"]  # no temporaries


def test_append_line_appends_to_a_regular_file_only(tmp_path):
    fsio.append_line(tmp_path / "ledger", b"+1")
    fsio.append_line(tmp_path / "ledger", b"+2")
    assert (tmp_path / "ledger").read_bytes() == b"+1\n+2\n"
    os.mkfifo(tmp_path / "fifo")
    fsio.append_line(tmp_path / "fifo", b"+3")  # neither blocks nor raises
    (tmp_path / "link").symlink_to(tmp_path / "ledger")
    fsio.append_line(tmp_path / "link", b"+4")
    assert (tmp_path / "ledger").read_bytes() == b"+1\n+2\n"


@pytest.mark.parametrize("size", [0, 100, (1 << 20) + 1])
def test_digests_are_sha256_and_hmac_sha256(size):
    data = os.urandom(size)
    assert fsio.hexdigest(data) == hashlib.sha256(data).hexdigest()
    for key in (b"k" * 32, b"k" * 100):
        assert fsio.hmac_hex(key, data) == hmac.new(key, data, "sha256").hexdigest().encode()
    assert fsio.json_digest({"b": [1, "x"], "a": None}) == \
        hashlib.sha256(b'{"a":null,"b":[1,"x"]}').hexdigest()


def test_seal_and_unseal():
    body = b'{"a":[1,"x"]}\nmore'
    raw = fsio.seal(b"k" * 32, body)
    assert fsio.unseal(raw, b"k" * 32) == body
    assert fsio.unseal(raw, b"j" * 32) is None
    assert fsio.unseal(raw.replace(b'"x"', b'"y"'), b"k" * 32) is None
    for bad in (b"", b"\n", b'{"seal": "00"}', raw[:64], b"\xff\n"):
        assert fsio.unseal(bad, b"k" * 32) is None


def test_sealed_documents_read_back_only_under_their_key(tmp_path):
    path = str(tmp_path / "notes" / "n")
    fsio.write_sealed(path, b"k" * 32, {"a": (1, "x")})
    assert fsio.read_sealed(path, b"k" * 32, 1 << 10) == {"a": (1, "x")}
    assert fsio.read_sealed(path, b"j" * 32, 1 << 10) is None
    assert fsio.read_sealed(path, b"k" * 32, 10) is None  # over the bound
    # A forged body behind no seal is never unmarshalled.
    (tmp_path / "notes" / "n").write_bytes(b"0" * 64 + b"\n" + marshal.dumps({"a": 2}))
    assert fsio.read_sealed(path, b"k" * 32, 1 << 10) is None


def test_the_base_imports_the_standard_library_alone():
    code = ("import sys; before = set(sys.modules); import nvstage.fsio as f;"
            "f.read_sealed('/nonexistent', b'k' * 32, 10); f.hexdigest(b'x');"
            "print(sorted(m for m in set(sys.modules) - before if m.startswith('nvstage')"
            " or m in ('hashlib', 'hmac', 'json', 're')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "['nvstage', 'nvstage.fsio']"
