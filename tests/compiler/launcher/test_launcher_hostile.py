"""What the launcher hands to plain nvcc because no cache could follow it: files the host
compiler or nvcc reads or writes beside the ones nvstage stages (pure: nvcc's captured
grammar)."""

from pathlib import Path

import pytest

from nvstage.compiler.launcher.flow import Fallback, Staged, understand
from nvstage.compiler.nvcc.grammar import Grammar

HELP = Path(__file__).parents[2] / "data" / "captured" / "cuda13.5-nvcc-help.txt"
BASE = ["-c", "k.cu", "-o", "k.o", "-arch=sm_90"]


@pytest.fixture(scope="module")
def g():
    return Grammar.from_help(HELP.read_text())


@pytest.mark.parametrize("extra, env, why", [
    (["-Xcompiler", "--coverage"], {}, "--coverage"),
    (["-Xcompiler", "-O2,-fstack-usage"], {}, "-fstack-usage"),
    (["--compiler-options=@flags.rsp"], {}, "@flags.rsp"),
    (["-Xcompiler", "-fprofile-use=prof"], {}, "-fprofile-use=prof"),
    (["-forward-unknown-to-host-compiler", "-ftest-coverage"], {}, "-ftest-coverage"),
    ([], {"DEPENDENCIES_OUTPUT": "k.dep"}, "$DEPENDENCIES_OUTPUT"),
    ([], {"SUNPRO_DEPENDENCIES": "k.dep k.o"}, "$SUNPRO_DEPENDENCIES"),
])
def test_what_no_cache_follows_is_plain_nvccs(g, tmp_path, extra, env, why):
    p = understand([*BASE, *extra], g, str(tmp_path), env)
    assert isinstance(p, Fallback) and why in p.reason


@pytest.mark.parametrize("extra", [["-fdevice-time-trace", "t.json"],  # time_trace.py
                                   ["-Xcompiler", "-fPIC,-Wall"],
                                   ["-Xcompiler", "-Wp,-D_FORTIFY_SOURCE=2"],
                                   ["-forward-unknown-to-host-compiler", "-fvisibility=hidden"]])
def test_ordinary_host_flags_are_still_staged(g, tmp_path, extra):
    assert isinstance(understand([*BASE, *extra], g, str(tmp_path), {}), Staged)
