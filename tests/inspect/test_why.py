"""Why a kernel changed (inspect/why.py), from the facts alone: the PTX's launch directives,
which stage a change reached, and what capped the registers. The same facts read from real
builds are tested in tests/cli/test_diff_pairs.py."""

from __future__ import annotations

from types import SimpleNamespace

from nvstage.inspect.why import Facts, explain, maxrregcount, ptx_entries

PTX = """.version 9.0
.target sm_90
.visible .entry bounded(
\t.param .u64 p
)
\t.maxntid 256, 1, 1
\t.minnctapersm 4
{
\tret;
}
.visible .entry capped()
\t.maxnreg 40
{
\tret;
}
"""


def test_ptx_entries_read_each_kernel_and_its_launch_directives():
    got = ptx_entries(PTX)
    assert got["bounded"]["maxntid"] == (256, 1, 1) and got["bounded"]["minnctapersm"] == 4
    assert got["capped"]["maxnreg"] == 40 and "maxntid" not in got["capped"]
    assert got["bounded"]["ptx_sha256"] != got["capped"]["ptx_sha256"]
    # an entry with no closing brace ends where the next begins
    assert ptx_entries(".entry a()\n.entry b()\n")["a"] == ptx_entries(".entry a()\n")["a"]


def test_maxrregcount_from_the_option_or_the_flags():
    assert maxrregcount(SimpleNamespace(maxrregcount=32, extra=())) == 32
    assert maxrregcount(SimpleNamespace(maxrregcount=None, extra=("-maxrregcount=40",))) == 40
    assert maxrregcount(SimpleNamespace(maxrregcount=None,
                                        extra=("--maxrregcount", "48"))) == 48
    assert maxrregcount(SimpleNamespace(maxrregcount=None, extra=("-O3",))) is None
    assert maxrregcount(SimpleNamespace()) is None  # a Triton build's options


def test_which_stage_a_change_reached():
    a = Facts(sass_sha256="s1", ptx_sha256="p1", register_cap=255)
    same_ptx = explain(a, Facts(sass_sha256="s2", ptx_sha256="p1", register_cap=255),
                       same_kernel=True)
    assert (same_ptx["ptx"], same_ptx["sass"]) == ("same", "changed")
    assert same_ptx["lines"] == ["the PTX is the same, the SASS changed: the change reached "
                                 "ptxas alone"]
    both = explain(a, Facts(sass_sha256="s2", ptx_sha256="p2", register_cap=32,
                            maxrregcount=32), same_kernel=True, registers=(40, 32))
    assert both["lines"] == [
        "the PTX changed as well as the SASS: the change reached cicc, not ptxas alone (nvcc "
        "passes -maxrregcount to cicc as well)",
        "B: -maxrregcount=32 caps its registers at 32 (it uses 32: at the cap)"]
    # two kernels: their PTX differs by construction, so nothing is said of it
    assert explain(a, Facts(ptx_sha256="p2"), same_kernel=False)["ptx"] is None


def test_launch_bounds_and_maxnreg():
    bounded = Facts(register_cap=64, maxntid=(1024, 1, 1), maxrregcount=24)
    doc = explain(Facts(register_cap=64, maxntid=(1024, 1, 1)), bounded, same_kernel=True,
                  registers=(22, 20))
    assert doc["lines"] == ["A: __launch_bounds__(1024) caps its registers at 64",
                            "B: __launch_bounds__(1024) overrides -maxrregcount=24: ptxas caps "
                            "its registers at 64"]
    two = Facts(register_cap=32, maxntid=(256, 1, 1), minnctapersm=8)
    assert explain(two, two, same_kernel=True)["lines"] == [
        "both: __launch_bounds__(256, 8) caps its registers at 32"]
    block = Facts(register_cap=64, maxntid=(32, 32, 1))
    assert "(.maxntid 32, 32, 1)" not in explain(block, block, same_kernel=True)["lines"][0]
    assert ".maxntid 32, 32, 1 caps" in explain(block, block, same_kernel=True)["lines"][0]
    nreg = Facts(register_cap=40, maxnreg=40)
    assert explain(nreg, nreg, same_kernel=False, registers=(40, 40))["lines"] == [
        "both: __maxnreg__(40) caps its registers at 40 (it uses 40: at the cap)"]
    assert explain(Facts(register_cap=255), Facts(register_cap=255),
                   same_kernel=False)["lines"] == []
