"""The host side of a run: each buffer's initial contents, and the check of the buffers that
come back against their expected expressions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nvstage.errors import NvstageError, WorkloadError
from nvstage.run.workload.expr import eval_array_expr, quote_expr
from nvstage.run.workload.spec import Workload


def initial_contents(w: Workload, values: Mapping[str, Any] | None = None) -> dict:
    """numpy arrays with each buffer's initial contents."""
    import numpy as np

    values = w.param_values() if values is None else values
    out = {}
    for b in w.buffers:
        n = w.element_count(b, values)
        dt = np.dtype(b.dtype)
        it = b.init
        if it.kind == "zeros":
            arr = np.zeros(n, dt)
        elif it.kind == "fill":
            arr = np.full(n, it.value, dt)
        elif it.kind == "range":
            arr = (it.start + it.step * np.arange(n, dtype=np.float64)).astype(dt)
        elif it.kind == "random":
            rng = np.random.default_rng(it.seed)
            if dt.kind == "f":
                arr = rng.uniform(it.low, it.high, n).astype(dt)
            else:
                hi = it.high if it.high > it.low + 1 else np.iinfo(dt).max
                arr = rng.integers(int(it.low), int(hi), n, dtype=dt, endpoint=True)
        else:  # npy
            arr = _load_npy(it.path, n, w._where(f"buffers.{b.name}", "init.npy"))
            arr = arr.astype(dt, copy=False)
        out[b.name] = np.ascontiguousarray(arr)
    return out


def _load_npy(path: str, n: int, where: str):
    """A .npy file a workload names, of exactly ``n`` elements. Mapped, not read, until its
    header has been checked: a header claiming more than the file holds, or a file far
    larger than the buffer, is one error, not a MemoryError or numpy's ValueError."""
    import numpy as np

    from nvstage.artifacts import open_regular

    try:
        with open_regular(path):  # a FIFO or device: refused unread
            pass
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except NvstageError as e:
        raise WorkloadError(e.message, where=where) from None
    except Exception as e:  # numpy's header parser raises ValueError, SyntaxError,
        # tokenize.TokenError, EOFError, ... on a damaged file: all of them mean "not .npy"
        raise WorkloadError(f"cannot read {path} as .npy: {type(e).__name__}: {e}",
                            where=where) from None
    if arr.size != n:
        raise WorkloadError(f"{path} holds {arr.size} elements, the buffer {n}", where=where)
    return np.array(arr).reshape(-1)


@dataclass(frozen=True)
class ResultCheck:
    """One returned buffer against its expected expression (not ``check.gate``'s report)."""

    buffer: str
    ok: bool
    max_abs_err: float | None
    mismatches: int
    elements: int
    message: str = ""

    def to_json(self) -> dict:
        return {"buffer": self.buffer, "ok": self.ok, "max_abs_err": self.max_abs_err,
                "mismatches": self.mismatches, "elements": self.elements,
                "message": self.message}


def run_check(w: Workload, initial: Mapping, results: Mapping,
              values: Mapping[str, Any] | None = None) -> list[ResultCheck]:
    """Compare each returned buffer with its expected expression over the initial contents."""
    import numpy as np

    values = w.param_values() if values is None else values
    names = {**values, **initial}
    out = []
    for bname, expr in w.check.expect:
        got = np.asarray(results[bname])
        try:
            want = np.asarray(eval_array_expr(expr, names))
            want = np.broadcast_to(want, got.shape)
        except Exception as e:  # a user expression: report it, keep the run's figures
            out.append(ResultCheck(bname, False, None, got.size, got.size,
                                   f"cannot evaluate {quote_expr(expr)}: "
                                   f"{type(e).__name__}: {e}"))
            continue
        close = np.isclose(got.astype(np.float64), want.astype(np.float64),
                           rtol=w.check.rtol, atol=w.check.atol)
        bad = int(got.size - np.count_nonzero(close))
        err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) \
            if got.size else 0.0
        msg = "" if bad == 0 else (f"first mismatch at index {int(np.argmin(close))}: got "
                                   f"{got.reshape(-1)[int(np.argmin(close))]!r}, want "
                                   f"{want.reshape(-1)[int(np.argmin(close))]!r}")
        out.append(ResultCheck(bname, bad == 0, err, bad, int(got.size), msg))
    return out
