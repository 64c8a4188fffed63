"""Atomic writes: the old file or the new one, never half; a failed write is one message."""

import os

import pytest

from nvstage import fsio
from nvstage.files import write_atomic, write_json_atomic
from nvstage.errors import UsageError, WriteError


def test_write_replaces_whole_and_keeps_normal_modes(tmp_path):
    p = tmp_path / "sub" / "out.json"
    write_json_atomic(p, {"a": 1})
    write_json_atomic(p, {"a": 2})
    assert p.read_text().strip().endswith("}") and '"a": 2' in p.read_text()
    assert oct(p.stat().st_mode & 0o777) == oct(0o666 & ~fsio.umask())
    assert [f.name for f in p.parent.iterdir()] == ["out.json"]  # no temp file left


def test_a_folder_in_the_way_is_one_clear_error(tmp_path):
    with pytest.raises(UsageError, match="it is a folder"):
        write_atomic(tmp_path, "x")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_unwritable_folder_is_one_clear_error(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    with pytest.raises(WriteError, match="cannot write"):
        write_atomic(ro / "x.json", "x")


def test_write_errors_are_still_oserrors_for_best_effort_writers(tmp_path):
    with pytest.raises(OSError):
        write_atomic(tmp_path, "x")


# --- what the target already is (hunt finding 2: -o /dev/null became a regular file) -------

import socket  # noqa: E402
import stat  # noqa: E402
import threading  # noqa: E402

from nvstage.files import append_text  # noqa: E402

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")


def _is_char_device(path) -> bool:
    return stat.S_ISCHR(os.lstat(path).st_mode)


@needs_root
def test_a_character_device_is_written_into_never_renamed_over(tmp_path):
    null = tmp_path / "null1"  # a private /dev/null: the machine's own is never at risk
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    write_atomic(null, "<html>" * 5000)
    write_json_atomic(null, {"a": 1})
    assert _is_char_device(null)
    assert [f.name for f in tmp_path.iterdir()] == ["null1"]  # no temp file left either


def test_dev_null_stays_a_character_device():
    write_atomic("/dev/null", "report")
    assert _is_char_device("/dev/null")


def test_a_link_to_a_device_is_replaced_never_written_through(tmp_path):
    # Only a link naming a descriptor we hold (/dev/stdout) is followed: one planted among
    # documents (nvrtc's keep folder writes through here) must not reach a terminal.
    link = tmp_path / "out.html"
    link.symlink_to("/dev/null")
    write_atomic(link, "x")
    assert not link.is_symlink() and link.read_text() == "x"
    assert _is_char_device("/dev/null")


def test_dev_stdout_to_a_pipe_writes_the_pipe(tmp_path):
    r, w = os.pipe()
    try:
        link = tmp_path / "stdout"
        link.symlink_to(f"/proc/self/fd/{w}")
        write_atomic(link, "piped")
        assert link.is_symlink()
        assert os.read(r, 100) == b"piped"
    finally:
        os.close(r)
        os.close(w)


def test_dev_stdout_to_a_file_writes_the_file_and_keeps_the_link(tmp_path):
    # /dev/stdout -> /proc/self/fd/1 -> the file the shell opened: a file of ours to fill,
    # not a link to replace (as root, the rename replaced /dev/stdout for the machine).
    out = tmp_path / "captured.txt"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        link = tmp_path / "stdout"
        link.symlink_to(f"/proc/self/fd/{fd}")
        write_atomic(link, "the report")
        assert link.is_symlink()
    finally:
        os.close(fd)
    assert out.read_text() == "the report"


def test_a_pipe_with_a_reader_is_written_into(tmp_path):
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    for _ in range(200):  # the reader's open() pairs with the write below
        try:
            write_atomic(fifo, b"through the pipe")
            break
        except WriteError:
            threading.Event().wait(0.01)
    reader.join(5)
    assert got == [b"through the pipe"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_pipe_nobody_reads_is_one_line_not_a_hang(tmp_path):
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    with pytest.raises(WriteError, match="FIFO .* that nothing reads"):
        write_atomic(fifo, "x")
    with pytest.raises(WriteError, match="nothing reads"):
        append_text(fifo, "x")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_socket_and_a_link_to_a_folder_are_refused(tmp_path):
    sock = tmp_path / "s"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock))
    try:
        with pytest.raises(WriteError, match="it is a socket"):
            write_atomic(sock, "x")
    finally:
        server.close()
    (tmp_path / "d").mkdir()
    (tmp_path / "to_d").symlink_to(tmp_path / "d")
    with pytest.raises(WriteError, match="it is a folder"):
        write_atomic(tmp_path / "to_d", "x")


def test_a_link_to_a_file_is_replaced_its_target_left_alone(tmp_path):
    (tmp_path / "precious").write_text("keep me")
    link = tmp_path / "out.json"
    link.symlink_to(tmp_path / "precious")
    write_atomic(link, "new")
    assert not link.is_symlink() and link.read_text() == "new"
    assert (tmp_path / "precious").read_text() == "keep me"


def test_in_a_document_folder_no_link_is_followed_and_no_device_written(tmp_path):
    link = tmp_path / "stages.json"
    link.symlink_to("/dev/null")
    write_json_atomic(link, {"a": 1}, in_document_folder=True)
    assert not link.is_symlink() and '"a": 1' in link.read_text()
    fifo = tmp_path / "report.html"
    os.mkfifo(fifo)
    with pytest.raises(WriteError, match="FIFO"):
        write_atomic(fifo, "x", in_document_folder=True)


def test_a_name_too_long_and_a_missing_proc_folder_are_one_line(tmp_path):
    with pytest.raises(WriteError, match="File name too long") as e:
        write_atomic(tmp_path / ("a" * 300), "x")
    assert "\n" not in e.value.message and len(e.value.message) < 400
    with pytest.raises(WriteError, match="cannot write /proc/self/x: ") as e:
        write_atomic("/proc/self/x", "x")
    assert "None" not in e.value.message


def test_a_long_name_that_fits_still_gets_a_temporary_file_beside_it(tmp_path):
    p = tmp_path / ("b" * 250)
    write_atomic(p, "x")  # ".{name}.XXXX.tmp" would be past 255 bytes
    assert p.read_text() == "x"
