"""The resources table of ``nvstage show``: every "?" in it is explained under it, by the
report that lacks the figure (ptxas -v and cuobjdump -res-usage each give only some)."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

from rich.console import Console

from nvstage.inspect.resources import parse_ptxas_verbose, res_usage_of_cubin
from nvstage.report.terminal.show import _resources

PTX = Path(__file__).resolve().parents[1] / "data" / "captured" / "params.sm_90.ptx"


def _table(rows) -> str:
    buf = io.StringIO()
    _resources(rows, Console(file=buf, width=200, no_color=True, highlight=False), False)
    return " ".join(buf.getvalue().split())


def test_ptxas_figures_alone_explain_cmem_and_lmem(toolkit, tmp_path):
    cubin = tmp_path / "k.cubin"
    cp = subprocess.run([toolkit.tool("ptxas"), "-v", "-arch=sm_90", str(PTX), "-o",
                         str(cubin)], capture_output=True, text=True, check=True)
    rows = parse_ptxas_verbose(cp.stderr)  # sm_90: no cmem[0] line, and never lmem
    assert rows and all(r.constant_bytes is None and r.local_bytes is None for r in rows)
    text = _table(rows)
    assert "cmem[0] ?: ptxas -v omits it from sm_90 on" in text
    assert "lmem ?: ptxas -v does not report local memory" in text
    assert "spill ?" not in text  # ptxas gives spills
    # cuobjdump reads both from the cubin: no "?" there for them, and no legend.
    rows = res_usage_of_cubin(cubin.read_bytes(), toolkit, arch="sm_90")
    assert all(r.constant_bytes is not None and r.local_bytes is not None for r in rows)
    text = _table(rows)
    assert "cmem[0] ?" not in text and "lmem ?" not in text
    assert "spill ?: not in cuobjdump's report" in text  # and its own "?" is explained
