"""What no key can see is never stored: files the assembler reads through ``.incbin``, and the
clock reaching an output through a time macro spelt in pieces. The programs built are run and
compared with plain nvcc's; what the compile prints is what plain nvcc prints."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from nvstage.compiler.cache.stage.headers import not_cacheable
from nvstage.compiler.cache.stage.stage_cache import without_date_time


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch) -> Path:
    root = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(root))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))
    return root


def run(path: Path) -> str:
    return subprocess.run([str(path)], capture_output=True, text=True, timeout=60).stdout


def compile_ok(cli, *args: str):
    r = cli("compile", *args)
    assert r.exit_code == 0, r.output
    return r


INCBIN = r'''#include <cstdio>
asm(".section .rodata\n.global payload\npayload:\n.incbin \"payload.txt\"\n.byte 0\n.text\n");
extern "C" const char payload[];
__global__ void k() {}
int main() { printf("payload=%s\n", payload); return 0; }
'''


def test_a_file_pulled_in_by_incbin_is_never_stale(cli, workdir, toolkit):
    """Finding 6: gcc's dependency list omits the .incbin file, so the host object came back
    from the cache with the old payload."""
    (workdir / "inc.cu").write_text(INCBIN)
    (workdir / "payload.txt").write_text("AAAA")
    compile_ok(cli, "inc.cu", "--arch", "sm_90", "-o", "inc")
    assert run(workdir / "inc") == "payload=AAAA\n"
    (workdir / "payload.txt").write_text("BBBB")
    r = compile_ok(cli, "inc.cu", "--arch", "sm_90", "-o", "inc")
    assert run(workdir / "inc") == "payload=BBBB\n"
    subprocess.run([toolkit.nvcc, "-arch=sm_90", "inc.cu", "-o", "plain"], cwd=workdir,
                   check=True, capture_output=True)
    assert run(workdir / "plain") == "payload=BBBB\n"
    # Only what assembles the file is left out: its preprocessing still comes from the cache.
    assert re.search(r"host-compile .* \d+(\.\d+)? m?s\s*$", r.stdout, re.M)
    assert re.search(r"host-preprocess .*\(cached\)", r.stdout)


TIME_SOURCE = r'''#include <cstdio>
#include "when.h"
#define CAT(a, b) a##b
__global__ void k() {}
int main() { printf("built at %s on %s\n", CAT(__TI, ME__), WHEN); return 0; }
'''


@pytest.mark.parametrize("header", ["#define WHEN CAT(__DA, TE__)\n",
                                    "#define WHEN CAT(__DA, TE__)\n#warning from when.h\n"])
def test_a_pasted_time_macro_is_never_cached_and_nvcc_prints_the_same(cli, workdir, toolkit,
                                                                     header):
    """Finding 8: ``__TIME__`` made by token pasting was cached, and a rebuild returned the
    earlier time. Spelt in pieces no lexical check sees, gcc's -Wdate-time finds it; its
    warnings never reach the user, alone or mixed with the source's own (#warning)."""
    (workdir / "tm.cu").write_text(TIME_SOURCE)
    (workdir / "when.h").write_text(header)
    first = compile_ok(cli, "tm.cu", "--arch", "sm_90", "-o", "tm")
    printed = run(workdir / "tm")
    time.sleep(1.1)
    again = compile_ok(cli, "tm.cu", "--arch", "sm_90", "-o", "tm")
    assert run(workdir / "tm") != printed  # a new time, as plain nvcc gives
    assert not re.search(r"preprocess .*\(cached\)", again.stdout)
    plain = subprocess.run([toolkit.nvcc, "-arch=sm_90", "tm.cu", "-o", "plain"], cwd=workdir,
                           capture_output=True, text=True)
    assert plain.returncode == 0 and "date-time" not in plain.stderr
    for r in (first, again):
        assert "date-time" not in r.output and "reproducible" not in r.output
        shown = "".join(line + "\n" for line in r.stderr.splitlines()  # the tools' own
                        if not line.startswith(("toolkit:", "[")) and
                        not re.match(r"\d+ stages in ", line))
        assert shown == plain.stderr


def test_a_users_werror_cannot_fail_on_the_caches_date_time_warning(cli, workdir):
    (workdir / "tm.cu").write_text(TIME_SOURCE)
    (workdir / "when.h").write_text("#define WHEN CAT(__DA, TE__)\n")
    r = compile_ok(cli, "tm.cu", "--arch", "sm_90", "-c", "-Xcompiler", "-Werror")
    assert "date-time" not in r.output and "cache 0 hits" in r.stderr
    r = compile_ok(cli, "tm.cu", "--arch", "sm_90", "-c", "-Xcompiler", "-Werror")
    assert not re.search(r"preprocess .*\(cached\)", r.stdout)
    # A user who asks for the warning gets it, as plain nvcc prints it; nothing is stored.
    r = compile_ok(cli, "tm.cu", "--arch", "sm_90", "-c", "-Xcompiler", "-Wdate-time")
    assert "[-Wdate-time]" in r.stderr


def test_not_cacheable_reads_the_spellings(tmp_path):
    files = {
        "plain.h": "#define X 1\n",
        "time.h": 'const char* t = __TIME__;\n',
        "pasted.h": "#define B CAT3(__, TIME, __)\n#define CAT3(a,b,c) a##b##c\n",
        "log.h": "#define J(a,b) a##b\nint LOG_TIME;\n",
        "incbin.cu": 'asm(".incbin \\"p.bin\\"");\n',
        "include.cu": 'asm(".include \\"m.s\\"");\n',
        "method.cu": "x.include(y);\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    os.mkfifo(tmp_path / "fifo.h")  # not waited on

    def why(name, assembles=False):
        return not_cacheable([str(tmp_path / name)], assembles=assembles)

    assert why("plain.h", True) is None and why("log.h") is None
    assert why("method.cu", True) is None and why("fifo.h", True) is None
    assert "time macro" in why("time.h") and "pastes" in why("pasted.h")
    assert why("incbin.cu") is None  # preprocessing reads no payload
    assert ".incbin" in why("incbin.cu", True) and ".incbin" in why("include.cu", True)


def test_without_date_time_takes_out_only_whole_warnings():
    warn = ('In file included from tm.cu:2:\n'
            'when.h:1:1: warning: macro "__DATE__" might prevent reproducible builds '
            '[-Wdate-time]\n'
            '    1 | static const char* d = W;\n'
            '      | ^~~~~~\n'
            'tm.cu:3:14: note: in expansion of macro \'W\'\n')
    assert without_date_time(warn) == ""
    assert without_date_time(warn + "tm.cu:4:2: warning: #warning x [-Wcpp]\n") is None
    assert without_date_time(warn + "cc1plus: some warnings being treated as errors\n") is None


@pytest.mark.parametrize("flag,side", [("--coverage", "k.gcno"), ("-fstack-usage", "k.su")])
def test_host_flags_that_write_side_files_run_every_time(cli, workdir, toolkit, flag, side):
    """gcc writes a file beside the object that no entry holds: the stage runs every time, so
    the file is there after a rebuild as after nvcc."""
    (workdir / "k.cu").write_text("__global__ void k(int *p) { p[threadIdx.x] = 1; }\n"
                                  "int main() { return 0; }\n")
    for _ in range(2):
        (workdir / side).unlink(missing_ok=True)
        r = compile_ok(cli, "k.cu", "-c", "-arch=sm_90", "-Xcompiler", flag, "-o", "k.o")
        assert (workdir / side).is_file(), r.output


def test_dependencies_output_in_the_environment_runs_the_host_side(cli, workdir, monkeypatch):
    (workdir / "k.cu").write_text("__global__ void k(int *p) { p[threadIdx.x] = 1; }\n")
    monkeypatch.setenv("DEPENDENCIES_OUTPUT", "deps.txt")
    for _ in range(2):
        (workdir / "deps.txt").unlink(missing_ok=True)
        compile_ok(cli, "k.cu", "-c", "-arch=sm_90", "-o", "k.o")
        assert (workdir / "deps.txt").is_file()
