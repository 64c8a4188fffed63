"""The launcher says what plain nvcc says and writes what it writes: nvcc's own warnings
(printed while it plans, so found in its --dryrun output) on a miss, on a miss whose plan was
remembered, and on a hit; and ``-o`` naming the source overwrites it as nvcc does, where
``nvstage compile`` refuses. Real nvcc, a real launcher process."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from nvstage import proc

SRC = "__global__ void k(float *x) { x[threadIdx.x] *= 2.f; }\n"


def _env(tmp_path: Path) -> dict[str, str]:
    return dict(os.environ, NVSTAGE_CACHE_DIR=str(tmp_path / "cache"),
                NVSTAGE_BUILD_RECORD=str(tmp_path / "record"))


def _records(tmp_path: Path) -> list[dict]:
    """The build record's entries, oldest first."""
    tu = tmp_path / "record" / "tu"
    return [json.loads(p.read_text()) for p in sorted(tu.iterdir())] if tu.is_dir() else []


def _launch(toolkit, d: Path, words: list[str], env) -> proc.Completed:
    return proc.run([sys.executable, "-m", "nvstage", toolkit.nvcc, *words], cwd=d, env=env,
                    timeout=600)


@pytest.mark.parametrize("words, said", [
    (["-arch", "sm_90", "-arch", "sm_80"], "nvcc warning : incompatible redefinition for "
                                          "option 'gpu-architecture'"),
    (["-arch", "sm_80", "-G", "-lineinfo"], "nvcc warning : '--device-debug (-G)' overrides "
                                            "'--generate-line-info (-lineinfo)'"),
], ids=["arch-twice", "G-lineinfo"])
def test_nvccs_own_warnings_on_a_miss_a_remembered_plan_and_a_hit(toolkit, tmp_path, words,
                                                                   said):
    d = tmp_path / "w"
    d.mkdir()
    (d / "k.cu").write_text(SRC)
    command = ["-c", *words, "k.cu", "-o", "k.o"]
    plain = proc.run([toolkit.nvcc, *command], cwd=d, timeout=600)
    assert plain.returncode == 0 and said in plain.stderr, plain.stderr
    env = _env(tmp_path)
    for way in ("miss", "hit", "plan remembered"):
        if way == "plan remembered":  # a new source: the command misses, its plan does not
            (d / "k.cu").write_text(SRC + "// changed\n")
        cp = _launch(toolkit, d, command, env)
        assert cp.returncode == 0, cp.stderr
        # Everything nvcc prints, in its order: its own warning first, then the tools'.
        assert cp.stderr == plain.stderr, way
        assert cp.stdout == plain.stdout == ""
    entries = _records(tmp_path)
    assert [e.get("hit", False) for e in entries] == [False, True, False]
    assert all(e["status"] == "ok" for e in entries), [e["reason"] for e in entries]


def test_nvstage_compile_shows_nvccs_warnings_on_a_miss_and_when_answered_whole(cli_env,
                                                                                tmp_path):
    env, d = cli_env
    said = "nvcc warning : '--device-debug (-G)' overrides '--generate-line-info (-lineinfo)'"
    outs = []
    for _ in range(3):  # built, every stage from the cache, then the whole command at once
        cp = proc.run([sys.executable, "-m", "nvstage", "compile", "k.cu", "-c", "-o", "k.o",
                       "-arch=sm_80", "-G", "-lineinfo"], cwd=d, env=env, timeout=600)
        assert cp.returncode == 0, cp.stderr
        assert cp.stderr.count(said) == 1, cp.stderr
        assert cp.stderr.index(said) == 0, cp.stderr  # before anything else, as nvcc says it
        outs.append(cp.stderr)
    assert "the whole command at once" in outs[-1]


@pytest.fixture
def cli_env(tmp_path):
    d = tmp_path / "w"
    d.mkdir()
    (d / "k.cu").write_text(SRC)
    env = _env(tmp_path)
    env.pop("COLUMNS", None)
    return env, d


def test_compile_refuses_o_naming_its_source_and_the_launcher_writes_as_nvcc(toolkit, dump,
                                                                           tmp_path):
    env = _env(tmp_path)
    d = tmp_path / "w"
    d.mkdir()
    (d / "k.cu").write_text(SRC)
    cp = proc.run([sys.executable, "-m", "nvstage", "compile", "k.cu", "-c", "-o", "k.cu"],
                  cwd=d, env=env, timeout=600)
    assert cp.returncode == 2
    assert "error: the build would write k.cu over its own input" in cp.stderr, cp.stderr
    assert (d / "k.cu").read_text() == SRC  # refused before anything ran

    # nvcc overwrites its input, and so does the launcher: it never fails what nvcc passes.
    results = {}
    for way in ("plain", "nvstage"):
        w = tmp_path / way
        w.mkdir()
        (w / "k.cu").write_text(SRC)
        front = [sys.executable, "-m", "nvstage"] if way == "nvstage" else []
        cp = proc.run([*front, toolkit.nvcc, "-c", "-arch=sm_80", "k.cu", "-o", "k.cu"],
                      cwd=w, env=env, timeout=600)
        results[way] = (cp.returncode, cp.stderr, cp.stdout)
        assert (w / "k.cu").read_bytes()[:4] == b"\x7fELF", way
    assert results["plain"] == results["nvstage"] == (0, "", "")
    assert dump(tmp_path / "plain" / "k.cu") == dump(tmp_path / "nvstage" / "k.cu")
    (entry,) = _records(tmp_path)
    assert entry["status"] == "fallback" and "over its own input" in entry["reason"]


def test_docs_say_the_refusal_is_compiles_and_the_launcher_does_as_nvcc():
    text = " ".join((Path(__file__).parents[3] / "docs" / "documents.md").read_text().split())
    m = re.search(r"[^;.]*`-o` naming an input[^;]*", text)
    assert m is not None
    sentence = m.group(0)
    assert "nvstage compile" in sentence and "launcher" in sentence, sentence
