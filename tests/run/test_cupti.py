"""CUPTI record matching on synthetic records (cupti-python's record shape; no GPU, no CUPTI)."""

from __future__ import annotations

import enum
import types

from nvstage.run.cupti import CuptiSession


class Kind(enum.IntEnum):
    DRIVER = 2
    MEMCPY = 1
    CONCURRENT_KERNEL = 10


def _rec(kind, start, end, corr, name=None, nbytes=None):
    r = types.SimpleNamespace(kind=int(kind), start=start, end=end, correlation_id=corr)
    if name is not None:
        r.name = name
    if nbytes is not None:
        r.bytes = nbytes
    return r


def _fake_cupti(calls):
    c = types.SimpleNamespace(ActivityKind=Kind)
    c.activity_register_callbacks = lambda req, done: calls.append(("register", req()))
    c.activity_enable = lambda k: calls.append(("enable", k))
    c.activity_disable = lambda k: calls.append(("disable", k))
    c.activity_flush_all = lambda flag: calls.append(("flush", flag))
    return c


def test_records_match_ops_in_order_and_join_their_launch_calls():
    calls = []
    s = CuptiSession(_fake_cupti(calls))
    ops = [(0, "h2d", "x"), (1, "launch", "saxpy"), (2, "d2h", "y")]
    for base in (0, 1000):  # two passes
        s.mark_pass()
        s._completed([
            _rec(Kind.DRIVER, base + 100, base + 103, 7 + base),  # the launch call: 3 ns
            _rec(Kind.CONCURRENT_KERNEL, base + 200, base + 250, 7 + base, name="saxpy"),
            _rec(Kind.MEMCPY, base + 10, base + 60, 5 + base, nbytes=64),
            _rec(Kind.MEMCPY, base + 300, base + 320, 9 + base, nbytes=64),
            _rec(Kind.CONCURRENT_KERNEL, base + 400, base + 401, 11 + base, name="nvstage_x"),
        ])
        s.end_pass()
    out = s.finish(ops, helper_prefix="nvstage_")
    by = {o["index"]: o for o in out["operations"]}
    assert [by[i]["gpu_ns_median"] for i in range(3)] == [50, 50, 20]
    assert by[1]["api_ns_median"] == 3 and by[1]["samples"] == 2
    assert ("flush", 1) in calls and ("disable", Kind.DRIVER) in calls


def test_start_without_cupti_python_is_none():
    import sys

    if "cupti" in sys.modules:
        return
    session, why = CuptiSession.start()
    assert session is None and "pip install -e '.[cupti]' in nvstage's checkout, or pip " \
        "install cupti-python" in why


def test_incomplete_records_from_a_forced_flush_are_left_out():
    s = CuptiSession(_fake_cupti([]))
    s._completed([_rec(Kind.CONCURRENT_KERNEL, 100, 150, 1, name="k"),
                  _rec(Kind.CONCURRENT_KERNEL, 200, 0, 2, name="k"),  # no end yet
                  _rec(Kind.MEMCPY, 0, 0, 3, nbytes=4)])
    assert [r["correlation"] for r in s.records] == [1]
