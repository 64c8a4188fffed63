"""The plan as a graph, on plans captured from CUDA 13.0 and 13.5. Pure: no tools run."""

from pathlib import Path

import pytest

from nvstage.compiler.nvcc.graph import ESTIMATE, build_graph
from nvstage.compiler.nvcc.plan import Plan, StageKind, parse_dryrun

PLANS = Path(__file__).parents[2] / "data" / "plans"
K = StageKind
ALL = sorted(p.name for p in PLANS.glob("*.txt"))


def load(name: str) -> Plan:
    return parse_dryrun((PLANS / name).read_text())


def by_kind(plan: Plan, kind: StageKind) -> list[int]:
    return [s.index for s in plan.stages if s.kind is kind]


def ancestors(graph, i: int) -> set[int]:
    seen, todo = set(), list(graph.deps[i])
    while todo:
        d = todo.pop()
        if d not in seen:
            seen.add(d)
            todo += graph.deps[d]
    return seen


@pytest.mark.parametrize("version", ["13.0", "13.5"])
def test_each_arch_chain_is_independent_of_the_host_preprocess(version):
    plan = load(f"cuda{version}-c-gencodes.txt")
    g = build_graph(plan)
    host_pp, = by_kind(plan, K.HOST_PREPROCESS)
    cudafe, = by_kind(plan, K.CUDAFE)
    dev_pp = by_kind(plan, K.DEVICE_PREPROCESS)
    cicc = by_kind(plan, K.CICC)
    ptxas = by_kind(plan, K.PTXAS)
    # Device preprocessing waits for nothing: it runs beside the host side from the start.
    assert all(g.deps[i] == set() for i in dev_pp) and g.deps[host_pp] == set()
    # cicc reads the module id cudafe++ writes, and its own arch's .cpp1.ii.
    for c, pp in zip(cicc, dev_pp, strict=True):
        assert g.deps[c] == {cudafe, pp}
    for p, c in zip(ptxas, cicc, strict=True):
        assert g.deps[p] == {c}
    # The two arch chains never wait on each other.
    assert not (ancestors(g, ptxas[0]) & {dev_pp[1], cicc[1], ptxas[1]})
    assert not (ancestors(g, ptxas[1]) & {dev_pp[0], cicc[0], ptxas[0]})
    assert g.levels()[0] == sorted([host_pp, *dev_pp])


@pytest.mark.parametrize("version", ["13.0", "13.5"])
def test_host_compile_waits_for_fatbinary_through_the_stub_it_includes(version):
    plan = load(f"cuda{version}-c-gencodes.txt")
    g = build_graph(plan)
    host_c, = by_kind(plan, K.HOST_COMPILE)
    fatbin, = by_kind(plan, K.FATBINARY)
    assert g.hidden[host_c] == ["kd/vadd.compute_90.cudafe1.stub.c", "kd/vadd.fatbin.c"]
    assert fatbin in g.deps[host_c]
    # The stub the host compile includes is the one the last cicc writes (it overwrites what
    # cudafe++ names), so the host compile waits for that cicc, and that cicc for cudafe++.
    last_cicc = by_kind(plan, K.CICC)[-1]
    assert last_cicc in g.deps[host_c]
    cudafe, = by_kind(plan, K.CUDAFE)
    assert cudafe in ancestors(g, last_cicc)


@pytest.mark.parametrize("name", ALL)
def test_every_edge_points_back_and_writers_of_one_file_keep_plan_order(name):
    plan = load(name)
    g = build_graph(plan)
    assert set(g.deps) == {s.index for s in plan.stages}
    for i, ds in g.deps.items():
        assert all(d < i for d in ds), (i, ds)
    writers: dict[str, list[int]] = {}
    for s in plan.stages:
        for o in (s.inputs if s.kind is K.CLEANUP else s.outputs):
            writers.setdefault(o, []).append(s.index)
    for path, ws in writers.items():
        for a, b in zip(ws, ws[1:]):
            assert a in ancestors(g, b), (path, a, b)
    # Anything a stage reads that an earlier stage writes is ready before it starts.
    for s in plan.stages:
        for p in g.reads(s.index):
            earlier = [w for w in writers.get(p, []) if w < s.index]
            if earlier and s.kind is not K.CLEANUP:
                assert max(earlier) in ancestors(g, s.index), (s.index, p)


@pytest.mark.parametrize("version", ["13.0", "13.5"])
def test_cleanup_comes_before_whoever_writes_what_it_removes(version):
    plan = load(f"cuda{version}-exe-sm90.txt")
    g = build_graph(plan)
    rm = plan.stages[0]
    assert rm.kind is K.CLEANUP and rm.inputs == ["kd/vadd_dlink.reg.c"]
    nvlink, = by_kind(plan, K.DEVICE_LINK)
    assert rm.index in g.deps[nvlink]
    nokeep = load(f"cuda{version}-exe-nokeep.txt")
    g2 = build_graph(nokeep)
    for s in nokeep.stages:
        if s.kind is K.CLEANUP:  # removes what a tool wrote unnamed: waits for all before it
            assert g2.deps[s.index] == set(range(1, s.index))


@pytest.mark.parametrize("version", ["13.0", "13.5"])
def test_rewrites_name_who_overwrites_or_removes_an_earlier_stages_output(version):
    # What a stage wrote is stored beside later stages' tools: a stage that overwrites it
    # (cicc rewrites the stub cudafe++ wrote) or removes it must wait for that store.
    plan = load(f"cuda{version}-c-gencodes.txt")
    rw = build_graph(plan).rewrites
    cudafe, = by_kind(plan, K.CUDAFE)
    assert rw
    for i in rw:
        assert plan.stages[i - 1].kind is K.CICC and cudafe in rw[i]
    nokeep = load(f"cuda{version}-exe-nokeep.txt")
    rw2 = build_graph(nokeep).rewrites
    for s in nokeep.stages:
        if s.kind is K.CLEANUP:
            assert rw2[s.index] == set(range(1, s.index))


@pytest.mark.parametrize("version", ["13.0", "13.5"])
def test_critical_path_of_two_arch_build(version):
    plan = load(f"cuda{version}-c-gencodes.txt")
    g = build_graph(plan)
    kinds = [plan.stages[i - 1].kind for i in g.critical_path()[0]]
    assert kinds == [K.HOST_PREPROCESS, K.CUDAFE, K.CICC, K.PTXAS, K.FATBINARY,
                     K.HOST_COMPILE]
    # With measured times the slow arch's chain is the one on the path.
    cicc = by_kind(plan, K.CICC)
    seconds = {s.index: 0.1 for s in plan.stages}
    seconds[cicc[1]] = 5.0
    path, total = g.critical_path(seconds)
    assert cicc[1] in path and cicc[0] not in path
    assert total == pytest.approx(0.1 * (len(path) - 1) + 5.0)
    # A bottom level is the longest way to the end: device preprocessing of the slow arch
    # outranks the other's.
    bl = g.bottom_levels(seconds)
    pp = by_kind(plan, K.DEVICE_PREPROCESS)
    assert bl[pp[1]] > bl[pp[0]]


def test_serial_plans_are_chains():
    for name in ("cuda13.5-ptx.txt", "cuda13.5-cubin.txt", "cuda13.5-fatbin.txt"):
        g = build_graph(load(name))
        assert all(len(level) == 1 for level in g.levels())
        path, total = g.critical_path()
        assert path == g.order
        assert total == pytest.approx(sum(ESTIMATE[s.kind] for s in g.stages.values()))
