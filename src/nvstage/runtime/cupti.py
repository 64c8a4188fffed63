"""Optional CUPTI activity records (the ``cupti`` extra: cupti-python, NVIDIA's licence).

Collected during the wall passes only (no hold kernels there), so each kernel and copy record
belongs to one op of the sequence: records are matched to ops in issue order on our stream,
and each kernel record is joined to its launch call's driver-API record by correlation id.
Everything here is guarded: no cupti-python, no records, no error.
"""

from __future__ import annotations

import statistics
import threading


class CuptiSession:
    def __init__(self, cupti_mod):
        self.c = cupti_mod
        self.lock = threading.Lock()
        self.records: list = []
        self.pass_bounds: list[tuple[int, int]] = []
        self._mark = 0

    @classmethod
    def start(cls) -> CuptiSession | None:
        try:
            from cupti import cupti  # noqa: PLC0415 - optional extra
        except Exception:
            return None
        s = cls(cupti)
        try:
            cupti.activity_register_callbacks(s._requested, s._completed)
            for kind in ("CONCURRENT_KERNEL", "MEMCPY", "DRIVER"):
                cupti.activity_enable(getattr(cupti.ActivityKind, kind))
        except Exception:
            return None
        return s

    def _requested(self):
        return 8 * 1024 * 1024, 0  # buffer size, max records (0: as many as fit)

    def _completed(self, activities):
        with self.lock:
            self.records.extend(_plain(a, self.c) for a in activities)

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
            for kind in ("CONCURRENT_KERNEL", "MEMCPY", "DRIVER"):
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
        return {"source": "CUPTI activity records during the wall passes",
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
