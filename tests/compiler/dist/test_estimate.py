"""--what-if-remote's model on captured unit times: the bounds it must respect and the
round trip it reads from the record."""

from __future__ import annotations

import pytest

from nvstage.compiler.dist.estimate import Step, Unit, estimate, measured_round_trip


def unit(name, cicc=2.0, ptxas=1.0, where=None, front=0.5, host=0.5) -> Unit:
    return Unit(name, [Step("host-preprocess", front), Step("cicc", cicc, where),
                       Step("ptxas", ptxas, where), Step("host-compile", host)])


def test_one_local_core_and_many_remote_cores_leave_the_local_stages():
    units = [unit(f"u{i}") for i in range(8)]
    e = estimate(units, remote_cores=64, local_cores=1, recorded_wall=32.0)
    assert e.local_work == pytest.approx(8.0) and e.remote_work == pytest.approx(24.0)
    # The local core is the bottleneck: 8 s of local stages, plus the last unit's tail.
    assert 8.0 <= e.wall <= 8.0 + 3.0 + 0.5
    assert e.critical_path == pytest.approx(4.0)
    assert e.to_json()["estimate"] is True


def test_few_remote_cores_bound_the_wall_by_remote_work():
    units = [unit(f"u{i}") for i in range(16)]
    e = estimate(units, remote_cores=2, local_cores=16, recorded_wall=60.0)
    assert e.wall >= e.remote_work / 2
    assert e.wall >= e.critical_path


def test_round_trip_is_measured_where_the_record_holds_both_kinds_of_run():
    units = [unit("a", cicc=3.0, ptxas=1.5, where="remote"), unit("b")]
    assert measured_round_trip(units) == pytest.approx(0.75)  # (1.0 + 0.5) / 2
    e = estimate(units, 8, 2, 10.0)
    assert e.round_trip_measured and e.round_trip == pytest.approx(0.75)
    # The remote unit already paid it; the local one is charged it.
    assert e.remote_work == pytest.approx(4.5 + 3.0 + 2 * 0.75)


def test_without_remote_runs_the_round_trip_is_an_assumption_said_so():
    e = estimate([unit("a")], 8, 1, 4.0)
    assert not e.round_trip_measured and e.round_trip == 0.0
    assert any("assumed 0 s" in n for n in e.notes)
    given = estimate([unit("a")], 8, 1, 4.0, round_trip=0.25, upload=2.0)
    # The upload (2 s) overlaps the first local stage (0.5 s).
    assert given.wall == pytest.approx(2.0 + 2.25 + 1.25 + 0.5)
    assert any("upload assumed 2 s" in n for n in given.notes)


def test_a_link_waits_for_every_unit_before_it():
    units = [unit("a"), unit("b"), Unit("link", [Step("command", 1.0)], compile=False)]
    e = estimate(units, 64, 4, 10.0)
    assert e.wall == pytest.approx(4.0 + 1.0)


def test_what_if_remote_needs_a_build_record(cli, tmp_path):
    r = cli("report", tmp_path, "--what-if-remote", "8")
    assert r.exit_code != 0 and "build record" in r.stderr
