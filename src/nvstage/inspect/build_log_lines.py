"""The line view of every kernel of a whole build, for the whole-build report's kernel rows: each
row's kernel read from the object file its translation unit wrote (``lineview.lines_of``), as
``show BUILD --kernel NAME --lineinfo`` reads it.

A build record keeps no intermediate file, only each command's output: its object, used while
it is still the file the entry recorded (same size and SHA-256; ``Entry.manifest_build``).
Reading one runs nvdisasm twice per cubin, so a bounded number of units is read; a row whose
code cannot be read gets one line saying why (rebuilt since, plain nvcc ran it, too many).
"""

from __future__ import annotations

from nvstage.errors import NvstageError
from nvstage.inspect.fatbin import kind_of_file
from nvstage.inspect.lineview import lines_of
from nvstage.inspect.sass import source_reader

MAX_UNITS = 200  # translation units whose objects are disassembled for one page


def _unit_lines(unit, toolkit) -> tuple[list, str | None]:
    """(the line views of the kernels in ``unit``'s object, or [] and why none)."""
    try:
        build = unit.entry.manifest_build(files=True, plan=False)
        obj = build.output  # only while it is still the file the entry recorded
        if not obj or kind_of_file(obj) not in ("object", "fatbin", "executable", "cubin"):
            return [], f"{unit.output or 'its output'} is gone or was rebuilt since this entry"
        text = source_reader(build.source, build.cwd, indent=True)
        return lines_of(obj, toolkit, source_text=text), None
    except (NvstageError, OSError) as e:
        return [], f"cannot read its code: {getattr(e, 'message', None) or e}"


def record_lines(view, toolkit, *, max_units: int = MAX_UNITS) -> dict[int, object]:
    """``view.kernels`` index -> its ``KernelLines``, or a line saying why there is none.
    Units are read side by side (nvdisasm starts in about a second, whatever the cubin)."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    by_unit: dict[int, list[int]] = {}
    for n, row in enumerate(view.kernels):
        by_unit.setdefault(row.unit, []).append(n)
    order = sorted(by_unit)
    read = order[:max_units]
    workers = max(1, min(8, os.cpu_count() or 1, len(read)))
    with ThreadPoolExecutor(workers, thread_name_prefix="nvstage-lines") as pool:
        got = dict(zip(read, pool.map(lambda i: _unit_lines(view.units[i], toolkit), read)))
    out: dict[int, object] = {}
    for index in order:
        found, why = got.get(index, ([], f"not read: the page disassembles the objects of "
                                         f"{max_units} translation units at most"))
        unit = view.units[index]
        for n in by_unit[index]:
            rec = view.kernels[n].record
            same = [k for k in found if k.name == rec.kernel and k.arch == rec.arch]
            if same:  # a device link's copy too: the one with the most code is the kernel
                out[n] = max(same, key=lambda k: len(k.instructions))
            else:
                out[n] = why or (f"no {rec.arch} cubin of {rec.kernel} in "
                                 f"{unit.output or 'its output'}")
    return out
