"""What one repetition of a workload would do, evaluated and printed without a GPU
(``nvstage run --dry-run``). Not the compile plan (``nvstage.compiler.plan``)."""

from __future__ import annotations

from nvstage.run.workload.spec import DTYPES, BufferArg, Workload


def dry_run_plan(w: Workload) -> dict:
    """The operations one repetition runs, evaluated (``--dry-run``; ``--json`` prints it)."""
    values = w.param_values()
    doc: dict = {"workload": w.name, "code": {"kind": w.code.kind, "path": str(w.code.path)},
                 "reps": w.reps, "warmup": w.warmup, "buffers": [], "operations": [],
                 "check": [{"buffer": b, "expect": e, "rtol": w.check.rtol,
                            "atol": w.check.atol} for b, e in w.check.expect]}
    for b in w.buffers:
        n = w.element_count(b, values)
        doc["buffers"].append({"name": b.name, "elements": n, "dtype": b.dtype,
                               "bytes": n * DTYPES[b.dtype], "init": b.init.kind})
    for kind, name, li in w.operations():
        if kind == "launch":
            lz = w.launches[li]
            args = [{"buffer": a.buffer} if isinstance(a, BufferArg)
                    else {"type": a.tag, "value": w.scalar_value(a, values, "")}
                    for a in lz.args]
            doc["operations"].append({"op": "launch", "kernel": name, **w.dims(li, values),
                                      "args": args})
        else:
            doc["operations"].append({"op": kind, "buffer": name,
                                      "bytes": w.nbytes(w.buffer(name), values),
                                      "host_memory": "pinned"})
    return doc


def dry_run_lines(w: Workload) -> list[str]:
    """``dry_run_plan`` as text, one line per buffer, operation and check."""
    p = dry_run_plan(w)
    lines = [f"workload {p['workload']}: {p['code']['kind']} {p['code']['path']}",
             f"repetitions {p['reps']} after {p['warmup']} warm-up"]
    lines += [f"buffer {b['name']}: {b['elements']} x {b['dtype']} = {b['bytes']} bytes, "
              f"init {b['init']}" for b in p["buffers"]]
    for step, op in enumerate(p["operations"], 1):
        if op["op"] == "launch":
            args = ", ".join(a["buffer"] if "buffer" in a else f"{a['type']}({a['value']})"
                             for a in op["args"])
            lines.append(f"{step:4d}. launch {op['kernel']} grid={op['grid']} "
                         f"block={op['block']} shared={op['shared']} ({args})")
        else:
            arrow = "host -> device" if op["op"] == "h2d" else "device -> host"
            lines.append(f"{step:4d}. copy {op['buffer']} {arrow}, {op['bytes']} bytes "
                         f"({op['host_memory']})")
    lines += [f"check {c['buffer']} == {c['expect']} (rtol {c['rtol']}, atol {c['atol']})"
              for c in p["check"]]
    return lines
