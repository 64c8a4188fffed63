"""What one repetition of a workload would do, evaluated and printed without a GPU
(``nvstage run --dry-run``). Not the compile plan (``nvstage.compiler.nvcc.plan``)."""

from __future__ import annotations

from nvstage.run.workload.spec import DTYPES, BufferArg, Workload


def dry_run_plan(w: Workload) -> dict:
    """The operations one repetition runs, evaluated (``--dry-run``; ``--json`` prints it).

    A launch repeated N times is one entry with ``"repeat": N`` (no key when N is 1), so
    the plan's size follows the file's, never the work it asks for."""
    values = w.param_values()
    doc: dict = {"workload": w.name, "code": {"kind": w.code.kind, "path": str(w.code.path)},
                 "reps": w.reps, "warmup": w.warmup, "buffers": [], "operations": [],
                 "check": [{"buffer": b, "expect": e, "rtol": w.check.rtol,
                            "atol": w.check.atol} for b, e in w.check.expect]}
    for b in w.buffers:
        n = w.element_count(b, values)
        doc["buffers"].append({"name": b.name, "elements": n, "dtype": b.dtype,
                               "bytes": n * DTYPES[b.dtype], "init": b.init.kind})
    def copy(kind: str, name: str) -> dict:
        return {"op": kind, "buffer": name, "bytes": w.nbytes(w.buffer(name), values),
                "host_memory": "pinned"}

    doc["operations"] += [copy("h2d", b) for b in w.to_device]
    for li, lz in enumerate(w.launches):
        args = [{"buffer": a.buffer} if isinstance(a, BufferArg)
                else {"type": a.tag, "value": w.scalar_value(a, values, "")}
                for a in lz.args]
        op = {"op": "launch", "kernel": lz.kernel, **w.dims(li, values), "args": args}
        if lz.repeat > 1:
            op["repeat"] = lz.repeat
        doc["operations"].append(op)
    doc["operations"] += [copy("d2h", b) for b in w.from_device]
    return doc


def dry_run_lines(w: Workload) -> list[str]:
    """``dry_run_plan`` as text, one line per buffer, copy, [[launch]] entry (its repeats
    counted, not listed) and check."""
    p = dry_run_plan(w)
    lines = [f"workload {p['workload']}: {p['code']['kind']} {p['code']['path']}",
             f"repetitions {p['reps']} after {p['warmup']} warm-up"]
    lines += [f"buffer {b['name']}: {b['elements']} x {b['dtype']} = {b['bytes']} bytes, "
              f"init {b['init']}" for b in p["buffers"]]
    step = 1
    for op in p["operations"]:
        if op["op"] == "launch":
            args = ", ".join(a["buffer"] if "buffer" in a else f"{a['type']}({a['value']})"
                             for a in op["args"])
            n = op.get("repeat", 1)
            times = f" x {n} (operations {step} to {step + n - 1})" if n > 1 else ""
            lines.append(f"{step:4d}. launch {op['kernel']} grid={op['grid']} "
                         f"block={op['block']} shared={op['shared']} ({args}){times}")
            step += n
            continue
        arrow = "host -> device" if op["op"] == "h2d" else "device -> host"
        lines.append(f"{step:4d}. copy {op['buffer']} {arrow}, {op['bytes']} bytes "
                     f"({op['host_memory']})")
        step += 1
    lines += [f"check {c['buffer']} == {c['expect']} (rtol {c['rtol']}, atol {c['atol']})"
              for c in p["check"]]
    return lines
