"""nvstage cache --explain BUILD: for each command of the last build that missed or fell back,
the first part of its key that differs from the earlier build of the same output (a word, a
variable, a header), or the fallback's reason; real nvcc, each build one run of a build tool
(a script named make, as tests/compiler/buildlog/test_buildlog_builds.py makes one)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from nvstage import proc
from nvstage.compiler.cache.command import explain as explain_mod

SOURCE = '#include "coef.h"\n__global__ void k(float* p) { p[threadIdx.x] *= COEF * SCALE; }\n'


def _launcher() -> list[str]:
    script = Path(sys.executable).parent / "nvstage"
    return [str(script)] if script.exists() else [sys.executable, "-m", "nvstage"]


class Project:
    """``k.cu`` including ``inc/coef.h``, built by ``make`` (a script: one build a run) with
    nvstage as the launcher, its cache and build record its own."""

    def __init__(self, toolkit, root: Path):
        self.root, self.nvcc = root, toolkit.nvcc
        (root / "inc").mkdir()
        (root / "k.cu").write_text(SOURCE)
        (root / "inc" / "coef.h").write_text("#define COEF 2.0f\n")
        self.make = root / "make"
        self.make.write_text('#!/bin/sh\n"$@"\n')
        self.make.chmod(0o755)
        self.env = {**os.environ, "NVSTAGE_CACHE_DIR": str(root / "cache")}

    def build(self, *words: str, **env: str) -> None:
        cp = proc.run([str(self.make), *_launcher(), self.nvcc, *words], cwd=self.root,
                      env={**self.env, **env}, timeout=600)
        assert cp.returncode == 0, cp.stderr

    def compile(self, scale: str = "1", **env: str) -> None:
        self.build("-c", "-arch=sm_90", "-Iinc", f"-DSCALE={scale}", "k.cu", "-o", "k.o", **env)

    def explain(self, unit: str | None = None) -> dict:
        return explain_mod.explain(self.root, unit, str(self.root / "cache"), self.env)


def _whys(doc: dict) -> list[tuple[str, str, str]]:
    return [(u["name"], u["status"], u["why"]["text"]) for u in doc["units"]]


def test_explain_names_the_word_the_header_and_the_variable(toolkit, tmp_path, cli,
                                                            monkeypatch):
    p = Project(toolkit, tmp_path)
    p.compile()
    assert _whys(p.explain()) == [
        ("k.o", "miss", "first build of this output (no earlier entry in the build record)")]
    p.compile()  # the same command: answered whole, nothing to explain
    doc = p.explain()
    assert doc["hits"] == 1 and doc["units"] == []
    # A -D word changed: the earlier entry is the hit's (its manifest replays the miss's key).
    p.compile("2")
    doc = p.explain()
    assert _whys(doc) == [("k.o", "miss", "argv: -DSCALE=2 (was -DSCALE=1)")]
    assert doc["units"][0]["why"]["component"] == "argv"
    assert doc["units"][0]["earlier"]["status"] == "hit"
    # A header changed: the same key; the files the two results read differ.
    (tmp_path / "inc" / "coef.h").write_text("#define COEF 3.25f\n")
    p.compile("2")
    (unit,) = p.explain()["units"]
    assert unit["why"]["component"] == "file"
    assert unit["why"]["name"] == str(tmp_path / "inc" / "coef.h")
    assert unit["why"]["text"] == "header inc/coef.h changed (18 -> 19 bytes)"
    # A keyed variable set: named, with its value (a flags variable).
    p.compile("2", NVCC_APPEND_FLAGS="-lineinfo")
    (unit,) = p.explain()["units"]
    assert unit["why"]["text"] == "environment: $NVCC_APPEND_FLAGS '-lineinfo' (was unset)"
    # A command plain nvcc runs: the fallback's reason.
    p.build("-E", "-Iinc", "-DSCALE=2", "k.cu", "-o", "k.ii")
    assert _whys(p.explain()) == [("k.ii", "fallback", "not staged: -E only preprocesses")]
    # The CLI: one line a command, and the JSON document.
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "cache"))
    p.compile("3")
    r = cli("cache", "--explain", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == [
        f"build 7 in {tmp_path / '.nvstage-build'}: 1 nvcc command, 0 answered whole, "
        "1 missed, 0 fell back",
        # ... and $NVCC_APPEND_FLAGS, set in the build before, is unset again
        "k.o: missed: argv: -DSCALE=3 (was -DSCALE=2) (and 1 more difference)"]
    doc = json.loads(cli("cache", "--explain", str(tmp_path), "k.o", "--json").stdout)
    assert doc["schema"] == "nvstage.explain/1" and doc["missed"] == 1
    assert doc["units"][0]["why"]["was"] == "-DSCALE=2"
    assert [d["name"] for d in doc["units"][0]["differences"]] == ["NVCC_APPEND_FLAGS"]
    r = cli("cache", "--explain", str(tmp_path), "other.o")
    assert r.exit_code != 0 and "no nvcc command of the last build" in r.stderr
    assert "Traceback" not in r.output
    r = cli("cache", "k.o")
    assert r.exit_code != 0 and "a unit is given with --explain BUILD only" in r.stderr


def test_a_key_recorded_in_an_entry_is_checked_before_it_is_used():
    good = {"schema": explain_mod.SUMMARY, "run": "0123456789abcdef", "key": "a" * 64,
            "nvcc": "/x/bin/nvcc", "cwd": "/b", "pwd": None, "env": {"PATH": None},
            "tools": {"bin/ptxas": [1, 2, 3, 4]}, "options_files": {},
            "host_compilers": [["/usr/bin/gcc", [1, 2, 3, 4]]]}
    assert explain_mod.read_summary({"command_key": good}) == good
    for bad in ({"key": "../../etc"}, {"run": "../x"}, {"env": {"PATH": {"sha": 5}}},
                {"tools": {"bin/ptxas": ["a", 2, 3, 4]}}, {"host_compilers": [[1, None]]},
                {"env": {str(n): None for n in range(2000)}}, {"schema": "other"}):
        assert explain_mod.read_summary({"command_key": {**good, **bad}}) is None, bad
    assert explain_mod.read_summary({"command_key": [1]}) is None
    assert explain_mod.read_summary(None) is None


@pytest.mark.parametrize("words", [["-c", "-DA=1", "k.cu"]])
def test_differences_follow_the_keys_order(words):
    key = {"nvcc": "/t/bin/nvcc", "cwd": "/b", "pwd": None,
           "env": {"PATH": {"sha": "1" * 16}}, "tools": {"bin/ptxas": [1, 2, 3, 4]},
           "options_files": {}, "host_compilers": []}
    later = {**key, "env": {"PATH": {"sha": "2" * 16}}, "tools": {"bin/ptxas": [9, 2, 3, 4]}}
    got = explain_mod.differences(["nvcc", *words], key, ["nvcc", *words, "-DB"], later)
    assert [d["component"] for d in got] == ["argv", "environment", "toolkit"]
    assert got[0]["text"] == "argv: -DB added"
    assert got[1]["text"] == "environment: $PATH changed (was set, now set)"
    assert got[2]["text"] == "toolkit: bin/ptxas changed (1 -> 9 bytes)"
