"""Optional CUPTI activity records (the ``cupti`` extra: cupti-python, NVIDIA's licence).

Collected during passes of their own, issued like the wall passes (no hold kernels), after the
measured repetitions, since DRIVER API tracing adds host time to every call. Each kernel and
copy record belongs to one op of the sequence: records are matched to ops in issue order on
our stream, and each kernel record is joined to its launch call's driver-API record by
correlation id. Everything here is guarded: no cupti-python, no records, no error.

API (cupti-python, docs.nvidia.com/cupti-python: "Python Bindings for CUPTI C APIs"):
``from cupti import cupti``; ``activity_register_callbacks(requested, completed)`` where
``requested()`` returns ``(buffer_size, max_num_records)`` and ``completed(activities)`` gets a
list of record objects with ``kind`` (an int; compare with ``ActivityKind``), ``start`` and
``end`` (ns), ``correlation_id``, ``name`` (kernels) and ``bytes`` (copies);
``activity_enable/disable(ActivityKind.X)``; ``activity_flush_all(1)`` (forced flush).
"""

from __future__ import annotations

import statistics
import threading

from nvstage.extras import CUPTI

KINDS = ("CONCURRENT_KERNEL", "MEMCPY", "DRIVER")


class CuptiSession:
    def __init__(self, cupti_mod):
        self.c = cupti_mod
        self.lock = threading.Lock()
        self.records: list = []
        self.pass_bounds: list[tuple[int, int]] = []
        self._mark = 0

    @classmethod
    def start(cls) -> tuple[CuptiSession | None, str]:
        """(a session, "") or (None, why not)."""
        try:
            from cupti import cupti  # noqa: PLC0415 - optional extra
        except Exception as e:
            return None, f"cupti-python is not importable ({e}; {CUPTI})"
        s = cls(cupti)
        enabled = []
        try:
            cupti.activity_register_callbacks(s._requested, s._completed)
            for kind in KINDS:
                cupti.activity_enable(getattr(cupti.ActivityKind, kind))
                enabled.append(kind)
        except Exception as e:  # e.g. a CUPTI newer than the driver: NOT_INITIALIZED
            for kind in enabled:  # leave nothing half switched on
                try:
                    cupti.activity_disable(getattr(cupti.ActivityKind, kind))
                except Exception:
                    pass
            return None, f"CUPTI did not start ({type(e).__name__}: {e})"
        return s, ""

    def _requested(self):
        return 8 * 1024 * 1024, 0  # buffer size, max records (0: as many as fit)

    def _completed(self, activities):
        # A forced flush may hand over records not yet complete (no end time): leave them out.
        recs = [r for r in (_plain(a, self.c) for a in activities)
                if r["start"] > 0 and r["end"] >= r["start"]]
        with self.lock:
            self.records.extend(recs)

    def mark_pass(self) -> None:
        """Forget what the GPU-time pass produced: only wall passes are matched to ops."""
        self.c.activity_flush_all(1)
        with self.lock:
            self._mark = len(self.records)

    def end_pass(self) -> None:
        self.c.activity_flush_all(1)
        with self.lock:
            self.pass_bounds.append((self._mark, len(self.records)))

    def finish(self, ops: list[tuple[int, str, str]], helper_prefix: str) -> dict:
        try:
            self.c.activity_flush_all(1)
            for kind in KINDS:
                self.c.activity_disable(getattr(self.c.ActivityKind, kind))
        except Exception:
            pass
        per_op: dict[int, list[float]] = {i: [] for i, _, _ in ops}
        correlations: dict[int, list[int]] = {i: [] for i, _, _ in ops}
        launch_api: dict[int, float] = {}
        for lo, hi in self.pass_bounds:
            recs = self.records[lo:hi]
            for r in recs:
                if r["kind"] == "api":
                    launch_api[r["correlation"]] = r["end"] - r["start"]
            gpu = sorted((r for r in recs if r["kind"] in ("kernel", "memcpy")
                          and not r["name"].startswith(helper_prefix)),
                         key=lambda r: r["start"])
            for (i, _kind, _name), r in zip(ops, gpu):
                per_op[i].append(r["end"] - r["start"])
                correlations[i].append(r["correlation"])
        out_ops = []
        for i, kind, name in ops:
            vals = per_op[i]
            api = [launch_api[c] for c in correlations[i] if c in launch_api]
            out_ops.append({
                "index": i, "kind": kind, "name": name,
                "gpu_ns_median": statistics.median(vals) if vals else None,
                "samples": len(vals), "correlation_ids": correlations[i][:4],
                "api_ns_median": statistics.median(api) if api else None,
            })
        return {"source": "CUPTI activity records from passes after the measured ones",
                "operations": out_ops}


def _plain(a, c) -> dict:
    """An activity record as a dict of the fields we use (names differ across versions)."""
    kind = int(getattr(a, "kind", -1))
    ak = c.ActivityKind

    def g(*names, default=0):
        for n in names:
            if hasattr(a, n):
                return getattr(a, n)
        return default

    if kind == int(ak.CONCURRENT_KERNEL):
        k = "kernel"
    elif kind == int(ak.MEMCPY):
        k = "memcpy"
    elif kind == int(ak.DRIVER):
        k = "api"
    else:
        k = "other"
    name = g("name", default="")
    return {"kind": k, "name": name if isinstance(name, str) else str(name),
            "start": float(g("start")), "end": float(g("end")),
            "correlation": int(g("correlation_id", "correlationId")),
            "bytes": int(g("bytes", default=0))}
