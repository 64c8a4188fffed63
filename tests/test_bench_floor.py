"""bench/floor.py's arithmetic on a synthetic manifest: the plan's critical path and the floor."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "bench_floor", Path(__file__).resolve().parents[1] / "bench" / "floor.py")
floor = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(floor)


def _stage(index, kind, inputs, outputs, seconds):
    return {"index": index, "kind": kind, "tool": kind, "argv": [kind], "arch": None,
            "inputs": inputs, "outputs": outputs, "seconds": seconds, "started": 0.0}


# One arch, -c, in nvcc's order: the host side (1, 2) and the device side (3, 4, 5) meet at
# fatbinary (6) and the host compile (7), which reads the stub's fatbin.c.
DOC = {"stages": [
    _stage(1, "host-preprocess", ["k.cu"], ["k.cpp4.ii"], 0.2),
    _stage(2, "cudafe++", ["k.cpp4.ii"], ["k.cudafe1.cpp", "k.module_id"], 0.5),
    _stage(3, "device-preprocess", ["k.cu"], ["k.cpp1.ii"], 0.2),
    _stage(4, "cicc", ["k.cpp1.ii", "k.module_id"], ["k.ptx"], 0.4),
    _stage(5, "ptxas", ["k.ptx"], ["k.cubin"], 0.05),
    _stage(6, "fatbinary", ["k.cubin", "k.ptx"], ["k.fatbin.c"], 0.01),
    _stage(7, "host-compile", ["k.cudafe1.cpp", "k.fatbin.c"], ["k.o"], 0.3),
]}


def test_critical_path_is_the_longest_chain_of_stage_times():
    path, seconds = floor.critical_path(DOC)
    assert path == [1, 2, 4, 5, 6, 7]  # cicc waits for cudafe++'s module id, not just stage 3
    assert abs(seconds - (0.2 + 0.5 + 0.4 + 0.05 + 0.01 + 0.3)) < 1e-9


def test_floor_is_the_chain_or_the_cpu_over_the_cores_whichever_is_longer():
    assert floor.floor_of(1.46, tools_cpu=1.2, own_cpu=0.3, cores=2) == 1.46
    assert abs(floor.floor_of(1.0, tools_cpu=2.2, own_cpu=0.2, cores=2) - 1.2) < 1e-9



def test_waits_floor_is_what_a_stage_waits_for_over_the_cores_then_its_chain():
    # One arch: the longest chain is the bound (the chain from stage 1, which waits for none).
    stage, seconds = floor.waits_floor(DOC, cores=2)
    assert stage == 1 and abs(seconds - floor.critical_path(DOC)[1]) < 1e-9
    # Two archs: fatbinary (9) waits for 1.9 s of stages, at best 0.95 s on 2 cores, then it
    # and the host compile run one after the other: 1.26 s, over the chain's 1.21 s and the
    # CPU over the cores' 1.105 s.
    two = {"stages": [
        _stage(1, "host-preprocess", ["k.cu"], ["k.cpp4.ii"], 0.1),
        _stage(2, "cudafe++", ["k.cpp4.ii"], ["k.cudafe1.cpp", "k.module_id"], 0.2),
        _stage(3, "device-preprocess", ["k.cu"], ["a.cpp1.ii"], 0.2),
        _stage(4, "cicc", ["a.cpp1.ii", "k.module_id"], ["a.ptx"], 0.5),
        _stage(5, "ptxas", ["a.ptx"], ["a.cubin"], 0.1),
        _stage(6, "device-preprocess", ["k.cu"], ["b.cpp1.ii"], 0.2),
        _stage(7, "cicc", ["b.cpp1.ii", "k.module_id"], ["b.ptx"], 0.5),
        _stage(8, "ptxas", ["b.ptx"], ["b.cubin"], 0.1),
        _stage(9, "fatbinary", ["a.cubin", "b.cubin"], ["k.fatbin.c"], 0.01),
        _stage(10, "host-compile", ["k.cudafe1.cpp", "k.fatbin.c"], ["k.o"], 0.3),
    ]}
    assert abs(floor.critical_path(two)[1] - 1.21) < 1e-9
    stage, seconds = floor.waits_floor(two, cores=2)
    assert stage == 9 and abs(seconds - 1.26) < 1e-9
    assert floor.floor_of(1.21, tools_cpu=2.21, own_cpu=0.0, cores=2, waits=seconds) == seconds
