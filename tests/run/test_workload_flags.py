"""[kernel] flags: nvcc flags for a workload's source (issue 46: llm.c builds with
--use_fast_math), only from the list a budgets file's [compile] extra accepts, less the flags
the run decides (arch, output kind)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvstage.errors import WorkloadError
from nvstage.run.workload import Workload

ROOT = Path(__file__).resolve().parents[2]
SAXPY = ROOT / "examples" / "run" / "saxpy.toml"


def _with_flags(tmp_path: Path, flags: str) -> Path:
    text = SAXPY.read_text().replace(
        'source = "../../kernels/saxpy.cu"',
        f'source = "{ROOT / "kernels" / "saxpy.cu"}"\nflags = {flags}')
    p = tmp_path / "saxpy.toml"
    p.write_text(text)
    return p


def test_flags_reach_nvcc(toolkit, tmp_path):
    from nvstage.inspect.sass import disassemble
    from nvstage.run.prepare import prepare

    sass = {}
    for name, flags in (("plain", "[]"), ("fast", '["--use_fast_math", "-DUNUSED=1"]')):
        w = Workload.from_toml(_with_flags(tmp_path, flags))
        prep = prepare(w, "sm_90", toolkit=toolkit)
        assert tuple(prep.build["options"]["extra"]) == w.code.flags
        cubin = tmp_path / f"{name}.cubin"
        cubin.write_bytes(prep.image)
        (k,) = [k for k in disassemble(cubin, toolkit) if k.is_entry]
        sass[name] = [i.text for i in k.code]
    # --use_fast_math flushes denormals: saxpy's FFMA becomes FFMA.FTZ
    assert any(".FTZ" in t for t in sass["fast"]) and not any(".FTZ" in t for t in sass["plain"])


@pytest.mark.parametrize("flags,said", [
    ('["-ccbin=/bin/sh"]', "could name a program to run or a file to write"),
    ('["--output-file=x.cubin"]', "could name a program to run or a file to write"),
    ('["-arch=sm_80"]', "the arch and the output's kind come from"),
    ('["-rdc=true"]', "the arch and the output's kind come from"),
    ('"--use_fast_math"', "must be a list of strings"),
])
def test_flags_that_are_refused(tmp_path, flags, said):
    with pytest.raises(WorkloadError) as e:
        Workload.from_toml(_with_flags(tmp_path, flags))
    msg = str(e.value)
    assert said in msg and "[kernel] flags" in msg and "\n" not in msg
