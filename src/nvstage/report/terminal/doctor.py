"""``nvstage doctor`` on a terminal: the toolkit table, then what was found and what works."""

from __future__ import annotations

from nvstage.report.terminal.console import plain_table, say
from nvstage.report.units import fmt_bytes


def render(r, con) -> None:
    """A ``doctor.DoctorReport``."""
    t = plain_table(pad_edge=False, title="toolkit")
    t.add_column("tool")
    t.add_column("version")
    t.add_column("path", overflow="fold")
    if r.toolkit:
        for info in r.toolkit.tools.values():
            t.add_row(info.name, info.version or ("-" if info.found else ""),
                      info.path or "NOT FOUND")
    t.add_row(f"host ({r.host.name})", r.host.version or "", r.host.path or "NOT FOUND")
    for name, version in r.runtime_compilers.items():
        label = {"nvrtc": "NVRTC", "nvjitlink": "nvJitLink"}.get(name, name)
        t.add_row(label, version or "", "library (cuda-bindings)" if version
                  else "NOT FOUND: compile --via nvrtc will not work")
    con.print(t)
    lines = [f"toolkit: {r.toolkit.describe()}" if r.toolkit
             else f"toolkit: none ({r.toolkit_error})"]
    lines += [f"also found: {path} ({source}); choose it with --nvcc"
              for source, path in r.other_toolkits if source != "PATH"]
    lines.append(path_line(r))
    lines.append(f"driver: {r.driver.reason}")
    for g in r.gpus:
        pcie = (f"PCIe gen{g.pcie_generation} x{g.pcie_width}"
                f" (max gen{g.pcie_max_generation} x{g.pcie_max_width})"
                if g.pcie_generation else "PCIe unknown")
        lines.append(f"gpu {g.index}: {g.name}, {g.arch} (cc {g.compute_capability}), "
                     f"{fmt_bytes(g.memory_bytes)}, {pcie}")
    if not r.gpus:
        lines.append(f"gpus: none listed ({r.nvml_note})")
    lines.append(f"compile: {'yes' if r.can_compile else 'NO'} ({r.compile_check})")
    lines.append(f"run: {'yes' if r.can_run else 'no'} ({r.driver.reason})")
    for line in lines:
        con.print(line, markup=False)


def path_line(r) -> str:
    """What the nvcc on PATH is to the toolkit nvstage uses: ``nvstage nvcc ARGS`` (Make's
    ``NVCC = nvstage nvcc``) and CMake's own search run PATH's first."""
    p, tk = r.on_path, r.toolkit
    if p is None:
        return ("PATH: no nvcc; nvstage nvcc ARGS runs the toolkit above" if tk else
                "PATH: no nvcc")
    if p.same or tk is None:
        return f"PATH: nvcc is {p.path}" + (", the toolkit above" if p.same else "")
    release = f"CUDA {p.version}" if p.version else "its --version names no CUDA release"
    script = ", a script: its commands are never answered whole from the cache" \
        if p.script else ""
    return (f"PATH: {p.path} is another toolkit's nvcc ({release}{script}); nvstage nvcc "
            f"ARGS and CMake's own search run it, not CUDA {tk.version} above: name that one "
            "(nvstage doctor --print-nvcc prints its path) or take the other off PATH")


def render_toolchain(t) -> None:
    """A ``cmake_toolchain.Toolchain`` written: what it says, on stderr (the file is the
    data)."""
    say(f"wrote {t.path}: CMAKE_CUDA_COMPILER {t.nvcc}, CUDAToolkit_ROOT {t.root}", soft_wrap=True)
    if t.libraries:
        say("libraries FindCUDAToolkit is told of: " + ", ".join(sorted(t.libraries)),
            soft_wrap=True)
    for name in t.missing:
        say(f"note: CUDA::{name} cannot come from this toolkit (no libcuda.so, no lib/stubs)",
            soft_wrap=True)
    if t.launcher:
        say("nvstage in front of every compile, device link, link and archive: "
            + " ".join(t.launcher), soft_wrap=True)
        say("C and C++ compiles keep a launcher given to cmake, after nvstage "
            "(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache: nvstage;ccache)", soft_wrap=True)
    import os

    say(f"use: cmake -DCMAKE_TOOLCHAIN_FILE={os.path.abspath(t.path)} ...", soft_wrap=True)
