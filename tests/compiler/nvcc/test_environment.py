"""The environment nvcc reads is keyed: a changed variable is never answered with an old object.

The names come from the toolkit (``nvcc_env``: its profile and binary). Pinned here against
what nvcc's own plan shows: a variable whose value changes ``nvcc --dryrun`` is keyed, one the
profile assigns outright is not, and the set that reaches the plan is this release's (a new
release that adds one fails ``test_the_variables_that_reach_the_plan_are_this_releases``).
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from nvstage.cli.main import run
from nvstage.compiler.cache.command import command_key as key
from nvstage.compiler.nvcc import environment as nvcc_env

PROFILE = """
TOP              = $(_HERE_)/..

CICC_PATH        = $(TOP)/nvvm/bin
LD_LIBRARY_PATH += $(TOP)/lib:
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib/stubs" "-L$(TOP)/lib"
PTXAS_FLAGS     +=
# a comment = ignored
"""

# Seen with the 13.5 wheels: every variable (beyond key.ENV's, which nvstage keys anyway) whose
# value changes the plan of a compile or a link. TMPDIR changes only scratch names.
REACH_THE_PLAN = {"CUDAFE_FLAGS", "INCLUDES", "LD_LIBRARY_PATH", "LIBRARIES", "NVLINK_FLAGS",
                  "NVVM_FLAGS", "NV_NVVM_VERSION", "OCG_FLAGS", "PTXAS_FLAGS",
                  "SYSTEM_INCLUDES", "TMPDIR"}


def test_profile_lines_that_add_to_the_environment_and_those_that_override_it():
    added, assigned = nvcc_env.profile_names(PROFILE)
    assert added == {"LD_LIBRARY_PATH", "INCLUDES", "LIBRARIES", "PTXAS_FLAGS"}
    assert assigned == {"TOP", "CICC_PATH"}


def test_names_in_a_binary_are_its_nul_terminated_identifiers():
    data = b"\0junk\0OCG_FLAGS\0NV_NVVM_VERSION\0lower_case\0PATH\0_HERE_\0A\x01_B\0X_Y"
    assert nvcc_env.binary_names(data) == {"OCG_FLAGS", "NV_NVVM_VERSION"}


def _plan(nvcc, args, cwd, extra):
    env = {**os.environ, **extra}
    cp = subprocess.run([nvcc, "--dryrun", *args], cwd=cwd, env=env, capture_output=True,
                        text=True, timeout=120)
    return re.sub(r"tmpxft_[0-9a-f]+_[0-9a-f]+-\d+", "TMP", cp.stdout + cp.stderr)


@pytest.fixture(scope="module")
def probed(toolkit, tmp_path_factory):
    """Each candidate name (the profile's, the ``#$ NAME=`` lines of a plan, what the binary
    holds, key.ENV) set to a marker: which change a compile's or a link's plan."""
    folder = tmp_path_factory.mktemp("probe")
    (folder / "e.cu").write_text("__global__ void k(float* x) { x[0] = 1; }\n")
    real = os.path.realpath(toolkit.nvcc)
    with open(os.path.join(os.path.dirname(real), "nvcc.profile")) as f:
        added, assigned = nvcc_env.profile_names(f.read())
    modes = (["-c", "-arch", "sm_90", "e.cu", "-o", "e.o"], ["-arch", "sm_90", "e.cu", "-o", "e"])
    shown = set(re.findall(r"^#\$ (\w+)=", _plan(toolkit.nvcc, modes[1], folder, {}), re.M))
    candidates = (set(nvcc_env.derive(real)) | added | assigned | shown | set(key.ENV)
                  | nvcc_env.NEUTRAL)
    candidates -= {"PATH"}  # a marker PATH finds no gcc: PATH is in key.ENV, keyed
    base = [_plan(toolkit.nvcc, m, folder, {}) for m in modes]
    reach = {n for n in candidates
             if any(_plan(toolkit.nvcc, m, folder, {n: "-DZZMARK"}) != b
                    for m, b in zip(modes, base))}
    return real, candidates, reach, assigned


def _keyed(real, env) -> set[str]:
    return set(key.ENV) | set(nvcc_env.env_names(real, env))


def test_every_variable_that_reaches_the_plan_is_keyed(probed):
    real, candidates, reach, assigned = probed
    missed = reach - _keyed(real, os.environ) - nvcc_env.NEUTRAL
    assert not missed, f"nvcc reads these, the key does not: {sorted(missed)}"
    # The profile's plain assignments override the environment: never keyed.
    assert not (assigned & _keyed(real, os.environ)), assigned
    assert assigned >= {"TOP", "CICC_PATH"} and not (assigned & reach)


def test_the_variables_that_reach_the_plan_are_this_releases(probed, toolkit):
    """A new release reading a new variable fails here: add a case for it in
    ``test_each_variable_changed_under_the_same_output`` and pin it."""
    real, candidates, reach, assigned = probed
    if not toolkit.version.startswith("13.5"):
        pytest.skip(f"pinned for CUDA 13.5; this toolkit is {toolkit.version}")
    assert reach - set(key.ENV) == REACH_THE_PLAN


def test_the_key_changes_exactly_where_a_keyed_variable_does(toolkit, tmp_path):
    base = dict(os.environ)
    k0 = key.key(toolkit.nvcc, ["-c", "k.cu"], str(tmp_path), base)
    for name in ("INCLUDES", "OCG_FLAGS", "NVVM_FLAGS", "PTXAS_FLAGS", "SYSTEM_INCLUDES"):
        assert key.key(toolkit.nvcc, ["-c", "k.cu"], str(tmp_path), {**base, name: "-O0"}) != k0
    for name in ("TOP", "CICC_PATH", "TMPDIR"):  # overridden by the profile; scratch names
        assert key.key(toolkit.nvcc, ["-c", "k.cu"], str(tmp_path), {**base, name: "/x"}) == k0


def test_the_names_are_remembered_with_the_nvcc(toolkit, tmp_path, monkeypatch):
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "k.cu").write_text("__global__ void k(float* x) { x[0] = 1; }\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(nvcc_env, "_memo", {})
    assert run([toolkit.nvcc, "-c", "k.cu", "-o", "k.o", "-arch=sm_90"]) == 0
    notes = list((tmp_path / "cache" / "inv" / "env").iterdir())
    assert len(notes) == 1
    real = os.path.realpath(toolkit.nvcc)
    nvcc_env._memo.clear()
    monkeypatch.setattr(nvcc_env, "derive", lambda p: pytest.fail("worked out again"))
    assert "OCG_FLAGS" in nvcc_env.env_names(real, os.environ)


KERNEL = """#include "cfg.h"
__global__ void k(float* x, int n) {
  float acc = 0;
  for (int i = 0; i < n; ++i) acc += x[i] * CFG + i;
  x[threadIdx.x] = acc;
}
"""

# name -> (value, whether plain nvcc's object changes with it); "{a}"/"{b}": include folders
# whose cfg.h differ (the command finds a/'s through -Ia, or through the variable where
# BEFORE gives it a first value). CUDAFE_FLAGS' value makes cudafe++ fail on the host
# headers: the launcher must fail as nvcc does, never answer with the object it has.
BEFORE = {"INCLUDES": "-I{a}", "SYSTEM_INCLUDES": "-isystem {a}"}
CASES = {
    "INCLUDES": ("-I{b}", True),
    "SYSTEM_INCLUDES": ("-isystem {b}", True),
    "PTXAS_FLAGS": ("--maxrregcount=24 -O0", True),
    "OCG_FLAGS": ("-O0", True),
    "NVVM_FLAGS": ("-O0", True),
    "CUDAFE_FLAGS": ("--no_exceptions", None),
    "NV_NVVM_VERSION": ("nvvm70", False),
    "LD_LIBRARY_PATH": ("/nonexistent", False),
    "LIBRARIES": ("-L/nonexistent", False),
    "NVLINK_FLAGS": ("-v", False),
    "TMPDIR": ("{tmp}", False),
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory, toolkit, dump):
    """A kernel whose cfg.h sits in a/ (found through -Ia) and another in b/, an entry for its
    command (built twice: the whole-command entry and the plan are remembered) and plain
    nvcc's object with the same words."""
    f = tmp_path_factory.mktemp("envcases")
    (f / "a").mkdir()
    (f / "b").mkdir()
    (f / "tmp").mkdir()
    (f / "a" / "cfg.h").write_text("#define CFG 3\n")
    (f / "b" / "cfg.h").write_text("#define CFG 7\n")
    (f / "k.cu").write_text(KERNEL)
    return f


def _words(toolkit, out="o.o", found="-Ia"):
    return [toolkit.nvcc, "-c", "-arch", "sm_90", "k.cu", *found.split(), "-o", out]


def _plain(words, f, env):
    cp = subprocess.run(words, cwd=f, env=env, capture_output=True, text=True, timeout=300)
    return cp.returncode


_BASE: dict[str, str] = {}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_variable_changed_under_the_same_output(name, folder, toolkit, dump, monkeypatch):
    if name not in REACH_THE_PLAN:
        pytest.fail(f"{name}: not a variable this release reads")
    value, changes = CASES[name]
    where = dict(a=folder / "a", b=folder / "b", tmp=folder / "tmp")
    value = value.format(**where)
    before = BEFORE.get(name, "").format(**where)
    monkeypatch.chdir(folder)
    if before:
        monkeypatch.setenv(name, before)
    else:
        monkeypatch.delenv(name, raising=False)
    found = "" if before else "-Ia"
    words = _words(toolkit, found=found)
    for _ in range(2):  # the entry and the remembered plan, as a build would leave them
        assert run(words) == 0
    old = dump(folder / "o.o")
    if before not in _BASE:  # plain nvcc's object before the change, once per baseline
        assert _plain(_words(toolkit, "base.o", found), folder, dict(os.environ)) == 0
        _BASE[before] = dump(folder / "base.o")
    assert _BASE[before] == old
    monkeypatch.setenv(name, value)
    got = run(words)
    want = _plain(_words(toolkit, "plain.o", found), folder, dict(os.environ))
    assert got == want, f"{name}={value}: nvstage exited {got}, nvcc {want}"
    if want != 0:
        assert changes is None
        return
    assert dump(folder / "o.o") == dump(folder / "plain.o")
    assert (dump(folder / "plain.o") != old) == changes, f"{name}={value}"


def test_nvstage_compile_with_the_same_output_follows_the_environment(folder, toolkit, dump,
                                                                       monkeypatch, capfd):
    monkeypatch.chdir(folder)
    words = ["compile", "k.cu", "-c", "-arch", "sm_90", "-Ia", "-o", "c.o"]
    for _ in range(3):
        assert run(words) == 0
    old = dump(folder / "c.o")
    monkeypatch.setenv("PTXAS_FLAGS", "--maxrregcount=24 -O0")
    assert run(words) == 0
    capfd.readouterr()
    assert _plain(_words(toolkit, "plainc.o"), folder, dict(os.environ)) == 0
    assert dump(folder / "c.o") == dump(folder / "plainc.o") != old


def test_the_names_are_read_from_the_rodata_alone_and_are_the_whole_files(toolkit):
    """nvcc's .rodata (1 MB) holds every name its 35 MB do: read alone, a 0.3 s scan of the
    cold path's first build in a cache folder is a few ms."""
    real = os.path.realpath(toolkit.nvcc)
    with open(real, "rb") as f:
        whole = nvcc_env.binary_names(f.read())
    part = nvcc_env._strings_of(real)
    assert len(part) < os.path.getsize(real) // 10
    assert nvcc_env.binary_names(part) == whole and "OCG_FLAGS" in whole
