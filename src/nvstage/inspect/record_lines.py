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

MAX_UNITS = 200  # translation units whose objects are disassembled for one page


def record_lines(view, toolkit, *, max_units: int = MAX_UNITS) -> dict[int, object]:
    """``view.kernels`` index -> its ``KernelLines``, or a line saying why there is none."""
    from nvstage.inspect.fatbin import kind_of_file
    from nvstage.inspect.lineview import lines_of
    from nvstage.inspect.sass import source_reader

    by_unit: dict[int, list[int]] = {}
    for n, row in enumerate(view.kernels):
        by_unit.setdefault(row.unit, []).append(n)
    out: dict[int, object] = {}
    for done, (index, rows) in enumerate(sorted(by_unit.items())):
        unit = view.units[index]
        found, why = [], None
        if done >= max_units:
            why = (f"not read: the page disassembles the objects of {max_units} translation "
                   "units at most")
        else:
            try:
                build = unit.entry.manifest_build(files=True, plan=False)
                obj = build.output  # only while it is still the file the entry recorded
                if not obj or kind_of_file(obj) not in ("object", "fatbin", "executable",
                                                        "cubin"):
                    why = (f"{unit.output or 'its output'} is gone or was rebuilt since this "
                           "entry")
                else:
                    found = lines_of(obj, toolkit, source_text=source_reader(
                        build.source, build.cwd, indent=True))
            except (NvstageError, OSError) as e:
                why = f"cannot read its code: {getattr(e, 'message', None) or e}"
        for n in rows:
            rec = view.kernels[n].record
            same = [k for k in found if k.name == rec.kernel and k.arch == rec.arch]
            if same:  # a device link's copy too: the one with the most code is the kernel
                out[n] = max(same, key=lambda k: len(k.instructions))
            else:
                out[n] = why or (f"no {rec.arch} cubin of {rec.kernel} in "
                                 f"{unit.output or 'its output'}")
    return out
