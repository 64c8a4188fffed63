"""Pairs in a diff of build records (inspect/build_log_diff.py with ``pairs``): two kernels of the
test project's record compared, A's with B's, and a name that names nothing said with what
the side has."""

from __future__ import annotations

import pytest

from nvstage.errors import UsageError
from nvstage.inspect.pairs import Pair
from nvstage.inspect.build_log_diff import diff_records


def test_a_pair_compares_two_kernels_of_two_units(cuproject_record):
    _, build = cuproject_record
    d = diff_records(build, pairs=[Pair("block_sum", "scale_kernel")])
    assert {k.arch for k in d.kernels} == {"sm_80", "sm_90"}
    for k in d.kernels:
        assert k.name == "block_sum ~ scale_kernel" and k.status == "changed"
        assert k.unit.endswith("reduce.cu.o ~ CMakeFiles/app.dir/src/scale.cu.o")
        assert k.a["shared_bytes"] == 512 and k.b["shared_bytes"] == 0
        assert k.kernel["a"] != k.kernel["b"]
    doc = d.to_json()
    assert [k["name"] for k in doc["kernels"]] == ["block_sum ~ scale_kernel"] * 2


def test_a_pair_that_names_nothing(cuproject_record):
    _, build = cuproject_record
    with pytest.raises(UsageError, match=r"no kernel 'nope' in B: B has .*block_sum"):
        diff_records(build, pairs=[Pair("block_sum", "nope")])
