"""The make jobserver client, against the real GNU make (Debian's 4.3: pipe descriptors)."""

import json
import os
import shutil
import sys
import textwrap

import pytest

from nvstage import proc
from nvstage.errors import UsageError
from nvstage.compiler.pipeline.jobserver import JobServer, jobs_in_build

CLIENT = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, {src!r})
    from nvstage.compiler.pipeline.jobserver import JobServer
    js = JobServer.from_env()
    got = 0
    if js is not None:
        while js.acquire(timeout=0.2):
            got += 1
        time.sleep(0.3)
        js.close()
    with open(sys.argv[1], "w") as f:
        json.dump({{"jobserver": js is not None, "tokens": got}}, f)
""")

needs_make = pytest.mark.skipif(not shutil.which("make"), reason="GNU make is not installed")


def _makefile(tmp_path, plus: bool, n: int = 1):
    (tmp_path / "client.py").write_text(
        CLIENT.format(src=os.path.join(os.path.dirname(__file__), "..", "..", "..", "src")))
    rules = "".join(f"out{i}.json:\n\t{'+' if plus else ''}{sys.executable} client.py $@\n"
                    for i in range(n))
    (tmp_path / "Makefile").write_text(
        "all: " + " ".join(f"out{i}.json" for i in range(n)) + "\n" + rules)


@needs_make
def test_tokens_from_make_j4_and_all_given_back(tmp_path):
    _makefile(tmp_path, plus=True)
    cp = proc.run(["make", "-j4"], cwd=tmp_path, timeout=60)
    assert cp.returncode == 0, cp.stderr
    got = json.loads((tmp_path / "out0.json").read_text())
    assert got == {"jobserver": True, "tokens": 3}  # four slots: its own and three tokens
    assert "jobserver" not in cp.stderr.lower()  # make complains when tokens go missing


@needs_make
def test_two_clients_share_the_pool(tmp_path):
    _makefile(tmp_path, plus=True, n=2)
    cp = proc.run(["make", "-j3"], cwd=tmp_path, timeout=60)
    assert cp.returncode == 0, cp.stderr
    tokens = [json.loads((tmp_path / f"out{i}.json").read_text())["tokens"] for i in range(2)]
    assert max(tokens) <= 2 and "jobserver" not in cp.stderr.lower()


@needs_make
def test_recipe_without_plus_has_no_jobserver(tmp_path):
    _makefile(tmp_path, plus=False)
    cp = proc.run(["make", "-j4"], cwd=tmp_path, timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert json.loads((tmp_path / "out0.json").read_text())["jobserver"] is False


def test_fifo_jobserver(tmp_path):
    fifo = tmp_path / "js"
    os.mkfifo(fifo)
    keep = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # the server's end, holding two tokens
    os.write(keep, b"++")
    js = JobServer.from_env({"MAKEFLAGS": f"-j3 --jobserver-auth=fifo:{fifo}"})
    assert js.acquire() and js.acquire() and not js.acquire()
    js.release()
    assert js.held == 1
    js.close()
    assert os.read(keep, 8) == b"++"
    os.close(keep)


def test_no_or_broken_makeflags():
    assert JobServer.from_env({}) is None
    assert JobServer.from_env({"MAKEFLAGS": "-j4 --jobserver-auth=999,998"}) is None
    assert JobServer.from_env({"MAKEFLAGS": "--jobserver-auth=fifo:/nonexistent"}) is None
    assert JobServer.from_env({"MAKEFLAGS": "--jobserver-auth=x,y"}) is None


def test_nvstage_jobs():
    assert jobs_in_build({}) is None and jobs_in_build({"NVSTAGE_JOBS": "3"}) == 3
    for bad in ("0", "-1", "lots"):
        with pytest.raises(UsageError, match="NVSTAGE_JOBS"):
            jobs_in_build({"NVSTAGE_JOBS": bad})
