"""The host side of a run: each buffer's initial contents, and the check of the buffers that
come back against their expected expressions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nvstage.errors import NvstageError, WorkloadError
from nvstage.run.workload.expr import eval_array_expr, quote_expr
from nvstage.run.workload.spec import Workload
from nvstage.files import open_regular, shown_path


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
            arr = load_npy(it.path, b.dtype, n, w._where(f"buffers.{b.name}", "init.npy"))
        out[b.name] = np.ascontiguousarray(arr)
    return out


def check_npys(w: Workload, values: Mapping[str, Any] | None = None) -> None:
    """Every ``.npy`` the workload's buffers start from, checked against its buffer (kind,
    element count, every value representable) before anything runs: ``run --dry-run`` and
    validation see a wrong file, not the GPU run. Raises ``WorkloadError``."""
    values = w.param_values() if values is None else values
    for b in w.buffers:
        if b.init.kind == "npy":
            n = w.element_count(b, values)
            _npy(b.init.path, b.dtype, n, w._where(f"buffers.{b.name}", "init.npy"),
                 convert=False)


def load_npy(path: str, dtype: str, n: int, where: str):
    """A .npy file a workload names as the contents of a ``dtype`` buffer of ``n`` elements,
    converted: flat, contiguous, ``dtype``. Refused (one ``WorkloadError`` naming the buffer)
    rather than converted silently when a value would change: see ``_npy``."""
    return _npy(path, dtype, n, where, convert=True)


# Elements converted at a time while checking values: the check costs a bounded buffer,
# not a copy of the whole file.
_CHUNK = 1 << 20
# numpy dtype kinds: b bool, i int, u unsigned, f float; what no buffer holds.
_NOT_NUMBERS = {"c": "complex numbers", "M": "dates", "m": "time spans", "U": "text",
                "S": "bytes", "V": "records", "O": "Python objects"}


def _npy(path: str, dtype: str, n: int, where: str, *, convert: bool):
    """The file mapped, not read, until its header has been checked: a header claiming more
    than the file holds, or a file far larger than the buffer, is one error, not a
    MemoryError or numpy's ValueError. Its kind must be one a ``dtype`` buffer holds (no
    text, records, dates, complex; no floats into an integer buffer), and each value must
    stay itself: a float64 of 1e300 into a float32 buffer (inf) or 300 into uint8 is an
    error, never a silent conversion."""
    import numpy as np


    try:
        with open_regular(path):  # a FIFO or device: refused unread
            pass
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except NvstageError as e:
        raise WorkloadError(e.message, where=where) from None
    except Exception as e:  # numpy's header parser raises ValueError, SyntaxError,
        # tokenize.TokenError, EOFError, ... on a damaged file: all of them mean "not .npy"
        raise WorkloadError(f"cannot read {shown_path(path)} as .npy: {type(e).__name__}: "
                            f"{e}", where=where) from None
    src, dst = arr.dtype, np.dtype(dtype)
    name = shown_path(path)
    if src.kind in _NOT_NUMBERS or src.kind not in "biuf":
        lost = ", and the imaginary parts would be dropped" if src.kind == "c" else ""
        raise WorkloadError(f"{name} holds {_NOT_NUMBERS.get(src.kind, src.kind)} ({src}): "
                            f"a {dtype} buffer holds real numbers{lost}", where=where)
    if not (np.can_cast(src, dst, "same_kind") or src.kind in "iu" and dst.kind in "iu"):
        raise WorkloadError(f"{name} holds {src} values: a {dtype} buffer cannot take them "
                            "without changing them", where=where,
                            hint=f"save it as {dtype} (np.save(path, a.astype('{dtype}')) "
                                 "once you have checked the values)")
    if arr.size != n:
        raise WorkloadError(f"{name} holds {arr.size} elements, the buffer {n}", where=where)
    flat = arr.reshape(-1)
    exact = np.can_cast(src, dst, "safe")
    out = np.empty(n, dst) if convert else None
    for lo in range(0, n, _CHUNK):
        part = np.asarray(flat[lo:lo + _CHUNK])
        if not exact:
            _check_values(part, dst, lo, name, where)
        if out is not None:
            out[lo:lo + len(part)] = part.astype(dst, copy=False)
    return out


def _check_values(part, dst, offset: int, name: str, where: str) -> None:
    """Each value of ``part`` (a slice of the file at ``offset``) survives the conversion
    to ``dst``: in an integer's range, or finite where it was finite."""
    import numpy as np

    if dst.kind in "iu":
        info = np.iinfo(dst)
        bad = np.flatnonzero((part < info.min) | (part > info.max))
        why = f"outside {dst}'s range {info.min} to {info.max}"
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            bad = np.flatnonzero(np.isfinite(part) & ~np.isfinite(part.astype(dst)))
        why = f"too large for {dst} (it would become infinite)"
    if bad.size:
        i = int(bad[0])
        more = f" (and {bad.size - 1} more here)" if bad.size > 1 else ""
        raise WorkloadError(f"{name}: element {offset + i} is {part[i].item()!r}, "
                            f"{why}{more}", where=where)


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
