"""The dryrun parser, on plans captured from CUDA 13.0 (system toolkit) and 13.5 (wheels)."""

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nvstage.errors import PlanError
from nvstage.compiler.nvcc.plan import Plan, StageKind, classify, parse_dryrun

PLANS = Path(__file__).parents[2] / "data" / "plans"
K = StageKind


def load(name: str) -> Plan:
    return parse_dryrun((PLANS / name).read_text())


@pytest.mark.parametrize("version", ["13.0", "13.5"])
def test_whole_program_build_has_every_stage_in_order(version):
    plan = load(f"cuda{version}-exe-sm90.txt")
    assert [s.kind for s in plan.stages] == [
        K.CLEANUP, K.HOST_PREPROCESS, K.CUDAFE, K.DEVICE_PREPROCESS, K.CICC, K.PTXAS,
        K.FATBINARY, K.HOST_COMPILE, K.DEVICE_LINK, K.DLINK_FATBINARY, K.DLINK_COMPILE, K.LINK]
    assert plan.variables["CICC_PATH"].endswith("/nvvm/bin")
    cicc = plan.stages[4]
    assert cicc.argv[0] == plan.variables["CICC_PATH"] + "/cicc"  # $CICC_PATH expanded
    assert cicc.arch == "compute_90" and cicc.outputs[0] == "kd/vadd.ptx"
    assert "kd/vadd.module_id" in cicc.inputs
    ptxas = plan.stages[5]
    assert (ptxas.arch, ptxas.inputs, ptxas.outputs) == ("sm_90", ["kd/vadd.ptx"],
                                                         ["kd/vadd.sm_90.cubin"])
    fatbin = plan.stages[6]
    assert fatbin.inputs == ["kd/vadd.sm_90.cubin", "kd/vadd.ptx"]
    assert fatbin.outputs == ["kd/vadd.fatbin", "kd/vadd.fatbin.c"]
    cudafe = plan.stages[2]
    assert "kd/vadd.cudafe1.stub.c" in cudafe.outputs  # stub sits beside the .cpp
    assert plan.stages[-1].outputs == ["vadd"]
    assert plan.stages[-1].inputs == ["kd/vadd_dlink.o", "kd/vadd.o"]
    dlink = plan.stages[10]
    assert "kd/vadd_dlink.fatbin.c" in dlink.inputs  # from -DFATBINFILE="..."


@pytest.mark.parametrize("version", ["13.0", "13.5"])
def test_two_gencodes_give_one_cicc_and_ptxas_per_arch(version):
    plan = load(f"cuda{version}-c-gencodes.txt")
    per_arch = [(s.kind, s.arch) for s in plan.stages if s.kind in (K.CICC, K.PTXAS)]
    assert per_arch == [(K.CICC, "compute_80"), (K.PTXAS, "sm_80"),
                        (K.CICC, "compute_90"), (K.PTXAS, "sm_90")]
    outs = [o for s in plan.stages if s.kind is K.PTXAS for o in s.outputs]
    assert outs == ["kd/vadd.compute_80.cubin", "kd/vadd.compute_90.sm_90.cubin"]
    assert plan.stages[-1].kind is K.HOST_COMPILE


@pytest.mark.parametrize("version", ["13.0", "13.5"])
@pytest.mark.parametrize("stop,last", [("ptx", K.PTXAS), ("cubin", K.PTXAS),
                                       ("fatbin", K.FATBINARY)])
def test_stop_points(version, stop, last):
    plan = load(f"cuda{version}-{stop}.txt")
    assert plan.stages[0].kind is K.DEVICE_PREPROCESS
    assert plan.stages[-1].kind is last
    assert K.HOST_COMPILE not in {s.kind for s in plan.stages}


@pytest.mark.parametrize("version", ["13.0", "13.5"])
def test_rdc_adds_device_c_and_compile_only(version):
    plan = load(f"cuda{version}-rdc-exe.txt")
    ptxas = next(s for s in plan.stages if s.kind is K.PTXAS)
    assert "--compile-only" in ptxas.argv
    cicc = next(s for s in plan.stages if s.kind is K.CICC)
    assert "--device-c" in cicc.argv


def test_plan_without_keep_has_cleanup_lines_and_tmp_names():
    plan = load("cuda13.5-exe-nokeep.txt")
    assert sum(s.kind is K.CLEANUP for s in plan.stages) == 2
    assert len(plan.runnable) == len(plan.stages) - 2
    assert all("tmpxft_" in o for s in plan.runnable[:-1] for o in s.outputs)


def test_json_round_trip():
    plan = load("cuda13.5-exe-sm90.txt")
    assert Plan.from_json(plan.to_json()) == plan


def test_no_plan_lines_is_a_plan_error():
    with pytest.raises(PlanError, match="no plan"):
        parse_dryrun("nvcc fatal   : Unsupported gpu architecture 'sm_50'\n")


def test_host_compiler_is_recognised_by_flags_not_name():
    s = classify(1, ["/opt/clang/bin/clang++", "-E", "-x", "c++", "k.cu", "-o", "k.ii"])
    assert s.kind is K.HOST_PREPROCESS and s.inputs == ["k.cu"] and s.outputs == ["k.ii"]
    assert classify(2, ["clang++", "-c", "a.cpp", "-o", "a.o"]).kind is K.HOST_COMPILE
    assert classify(3, ["clang++", "a.o", "-o", "a"]).kind is K.LINK


@given(st.lists(st.text(max_size=60), max_size=8))
def test_fuzzed_plans_parse_or_fail_clearly(lines):
    text = "\n".join("#$ " + line for line in lines)
    try:
        parse_dryrun(text)
    except PlanError:
        pass


def test_lib_archiver_is_a_library_stage_run_without_a_shell():
    # nvcc -lib prints its archiver as a command substitution; no shell will expand it here.
    text = ('#$ _HERE_=/x\n'
            '#$ gcc -c -x c++ "kd/k.cudafe1.cpp" -o "kd/k.o"\n'
            '#$ "`gcc -print-prog-name=ar`" cr "lib k.a" "kd/k.o"\n')
    ar = parse_dryrun(text).stages[-1]
    assert (ar.kind, ar.tool, ar.argv) == (K.LIBRARY, "ar", ["ar", "cr", "lib k.a", "kd/k.o"])
    assert (ar.inputs, ar.outputs) == (["kd/k.o"], ["lib k.a"])


def test_what_nvcc_says_while_planning_is_kept_and_round_trips():
    text = ("nvcc warning : Cannot find valid GPU for '-arch=native', default arch is used\n"
            "#$ _HERE_=/x\n#$ gcc -E -x c++ k.cu -o kd/k.cpp4.ii\n\n")
    plan = parse_dryrun(text)
    assert plan.messages == ["nvcc warning : Cannot find valid GPU for '-arch=native', "
                             "default arch is used"]
    assert Plan.from_json(plan.to_json()) == plan
    old = plan.to_json()
    del old["messages"]  # a manifest written before messages were kept
    assert Plan.from_json(old).messages == []
