"""Registers, spills, stack, shared and constant memory per kernel and arch.

A build's ptxas stages: what ptxas wrote into each cubin, read at build time and kept in the
build record (``compiler.cubin_figures``: every figure of ptxas -v but its compile time).
Older manifests, NVRTC and nvJitLink: two sources, joined: ptxas' ``-v`` report (spills,
barriers, compile time; cmem[0] only up to sm_8x) and ``cuobjdump -res-usage`` on the cubin
(registers, stack, shared, local, cmem[0] on every arch, but no spills). For ``-rdc`` builds
the ptxas numbers are per file; the cubin from the device link holds the final ones.

``shared_bytes`` is always the kernel's own static shared memory, as ptxas prints it. From
sm_90 on, the ``.nv.shared.<kernel>`` section of a linked (loadable) cubin also holds the 1 KiB
the system reserves per block, and both ``cuobjdump -res-usage`` (SHARED) and ``nvlink -v``
("bytes smem") count it: ``histogram`` in kernels/multi.cu is 1024 bytes to ptxas and 2048 to
cuobjdump on sm_90. The readers take it out here, and keep the figure the tool printed in
``shared_section_bytes``. A relocatable (``-rdc -c``) cubin's section holds no reservation.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from dataclasses import replace
from pathlib import Path

from nvstage import proc
from nvstage.files import read_regular
from nvstage.errors import ArtifactError, ToolkitError
from nvstage.inspect.names import demangle_all
from nvstage.inspect.kernels import KernelRecord
from nvstage.compiler.manifest.model import reading_toolkit
from nvstage.compiler.nvcc.cubin_figures import SPILL, SOURCE
from nvstage.compiler.nvcc.plan import StageKind
from nvstage.inspect.elf import read_cubin, refine_arch
from nvstage.inspect.fatbin import image_bytes, kind_of_file, read_bytes

# Seen with CUDA 13.5 on sm_90, sm_100, sm_103, sm_110, sm_120 and sm_121, never on sm_75..sm_89.
SM90_RESERVED_SHARED = 1024
_SM = re.compile(r"^sm_(\d+)")


def own_shared(reported: int, arch: str, *, linked: bool) -> int:
    """The kernel's own static shared memory, from a figure that counts the sm_90+ system
    reservation when ``linked`` (cuobjdump's SHARED, nvlink's smem for a loadable cubin)."""
    m = _SM.match(arch or "")
    if linked and m and int(m.group(1)) >= 90 and reported >= SM90_RESERVED_SHARED:
        return reported - SM90_RESERVED_SHARED
    return reported


_COMPILING = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
# Triton ships CUDA 13's ptxas as "ptxas-blackwell", which names itself so in its report.
_PROPS = re.compile(r"(?:ptxas(?:-blackwell)?|nvlink) info\s*: Function properties for "
                    r"'?([^':\s]+)'?:?\s*$")
# NVRTC's log prefixes the frame line with "ptxas         .".
_FRAME = re.compile(r"^(?:ptxas\s+\.)?\s*(\d+) bytes stack frame, (\d+) bytes spill stores, "
                    r"(\d+) bytes spill loads")
_USED = re.compile(r"(?:ptxas(?:-blackwell)?|nvlink) info\s*: [Uu]sed (\d+) registers(.*)$")
_TIME = re.compile(r"ptxas(?:-blackwell)? info\s*: Compile time = ([\d.]+) ms")
_FIELDS = {
    "barriers": re.compile(r"used (\d+) barriers"),
    "shared_bytes": re.compile(r"(\d+) bytes smem"),
    "constant_bytes": re.compile(r"(\d+) bytes cmem\[0\]"),
    "stack": re.compile(r"(\d+) (?:bytes cumulative stack size|stack)\b"),
    "local_bytes": re.compile(r"(\d+) bytes lmem"),
}


def parse_ptxas_verbose(text: str, *, arch: str | None = None, final: bool = True,
                        source: str = "ptxas -v") -> list[KernelRecord]:
    """Kernels from ptxas ``-v`` (or nvlink ``-v``) output, in order. Pure but for demangling.

    nvlink does not name the arch: pass ``arch``. Lines that are not resource lines (warnings,
    the gmem summary) are skipped; a ``Used`` line with no kernel before it is an error.
    """
    if not isinstance(text, str):
        raise ArtifactError("ptxas output must be text")
    rows: list[dict] = []
    current: dict | None = None
    frames: dict[str, tuple[int, int, int]] = {}
    pending_props: str | None = None
    for line in text.splitlines():
        m = _COMPILING.search(line)
        if m:
            current = {"kernel": m.group(1), "arch": m.group(2)}
            rows.append(current)
            continue
        m = _PROPS.search(line)
        if m:
            pending_props = m.group(1)
            if "nvlink" in line:  # nvlink names the kernel here and reports on the next line
                current = {"kernel": pending_props, "arch": arch or "", "linked": True}
                rows.append(current)
            continue
        m = _FRAME.search(line)
        if m and pending_props is not None:
            frames[pending_props] = tuple(int(x) for x in m.groups())  # type: ignore[assignment]
            pending_props = None
            continue
        m = _USED.search(line)
        if m:
            if current is None or "registers" in current:
                raise ArtifactError(f"ptxas output has a 'Used' line with no kernel before it: "
                                    f"{line.strip()[:100]!r}")
            current["registers"] = int(m.group(1))
            for key, rx in _FIELDS.items():
                f = rx.search(m.group(2))
                if f:
                    current[key] = int(f.group(1))
            continue
        m = _TIME.search(line)
        if m and current is not None and "registers" in current:
            current["compile_ms"] = float(m.group(1))
    names = demangle_all(r["kernel"] for r in rows)
    out = []
    for r in rows:
        if "registers" not in r:
            continue  # a device function, or output cut short before its numbers
        frame = frames.get(r["kernel"])
        k_arch = r["arch"] or (arch or "")
        smem = r.get("shared_bytes", 0)
        linked = r.get("linked", False)  # nvlink counts the sm_90+ reservation; ptxas does not
        out.append(KernelRecord(
            kernel=r["kernel"], demangled=names[r["kernel"]], arch=k_arch,
            registers=r["registers"],
            spill_stores=frame[1] if frame else None,
            spill_loads=frame[2] if frame else None,
            spill_source=source if frame else None,
            stack_frame=frame[0] if frame else r.get("stack", 0),
            shared_bytes=own_shared(smem, k_arch, linked=linked),
            constant_bytes=r.get("constant_bytes"), local_bytes=r.get("local_bytes"),
            barriers=r.get("barriers"), compile_ms=r.get("compile_ms"),
            source=source, final=final, shared_section_bytes=smem if linked else None))
    return out


_ARCH_LINE = re.compile(r"^\s*arch = (\w+)")
_FUNC = re.compile(r"^\s*Function ([^\s:]+):\s*$")
_KV = re.compile(r"([A-Z]+(?:\[\d+\])?):(\d+)")


def parse_res_usage(text: str, *, arch: str | None = None, final: bool = True,
                    source: str = "cuobjdump -res-usage") -> list[KernelRecord]:
    """Kernels from ``cuobjdump -res-usage``. ``arch`` for a bare cubin, whose listing has no
    ``arch =`` header. ``final``: the listing is of linked cubins (not ``-rdc -c`` ones), whose
    SHARED counts the sm_90+ reservation; ``shared_bytes`` leaves it out, ``shared_section_bytes``
    keeps SHARED as printed. Pure but for demangling."""
    if not isinstance(text, str):
        raise ArtifactError("cuobjdump output must be text")
    rows: list[tuple[str, str, dict]] = []
    cur_arch, in_elf, func = arch, True, None
    for line in text.splitlines():
        if line.startswith("Fatbin "):
            in_elf = line.startswith("Fatbin elf")
            cur_arch = None
            continue
        if arch_line := _ARCH_LINE.match(line):
            cur_arch = arch_line.group(1)
        elif (named := _FUNC.match(line)) and in_elf:
            func = named.group(1)
        elif func is not None and "REG:" in line:
            vals = {k: int(v) for k, v in _KV.findall(line)}
            if cur_arch is None:
                raise ArtifactError("cuobjdump resource usage names no arch for "
                                    f"{func}; pass arch=")
            rows.append((func, cur_arch, vals))
            func = None
    names = demangle_all(r[0] for r in rows)
    return [KernelRecord(
        kernel=k, demangled=names[k], arch=a, registers=v.get("REG", 0),
        spill_stores=None, spill_loads=None, stack_frame=v.get("STACK", 0),
        shared_bytes=own_shared(v.get("SHARED", 0), a, linked=final),
        constant_bytes=v.get("CONSTANT[0]"), local_bytes=v.get("LOCAL"), source=source,
        final=final, shared_section_bytes=v.get("SHARED")) for k, a, v in rows]


def res_usage_of_cubin(data: bytes, toolkit, *, arch: str, final: bool = True,
                       source: str = "cuobjdump -res-usage") -> list[KernelRecord]:
    """Run cuobjdump -res-usage on one cubin's bytes (from a file or a fatbin image)."""
    cubin = read_cubin(data)
    with tempfile.TemporaryDirectory(prefix="nvstage-res-") as tmp:
        p = Path(tmp, f"image.{arch}.cubin")
        p.write_bytes(data)
        cp = proc.run([toolkit.tool("cuobjdump"), "-res-usage", str(p)], timeout=120)
    if cp.returncode != 0:
        raise ToolkitError(f"cuobjdump -res-usage failed: {(cp.stderr or cp.stdout).strip()}")
    # cuobjdump lists device functions too; keep the kernels. It does not print barriers: the
    # cubin's EIATTR_NUM_BARRIERS is what ptxas -v reports.
    return [replace(r, barriers=cubin.barriers.get(r.kernel, 0))
            for r in parse_res_usage(cp.stdout, arch=arch, final=final, source=source)
            if r.kernel in cubin.kernels]


def file_resources(path: str | os.PathLike, toolkit) -> list[KernelRecord]:
    """Per kernel and arch, for a cubin, fatbin, object or executable (a build folder is
    ``gather.resources_of``'s).

    Numbers come from cuobjdump -res-usage on each cubin image (spills are not in it: they
    show as unknown). In an executable only the images the driver loads are used; in an -rdc
    object the cubins are relocatable and their numbers are not final.
    """
    kind = kind_of_file(path)
    if kind == "cubin":
        data = read_bytes(path)
        cubin = read_cubin(data, str(path))
        return res_usage_of_cubin(data, toolkit, arch=cubin.arch,
                                  final=not cubin.relocatable)
    if kind == "ptx":
        raise ArtifactError(f"{path} is PTX: it has no resource usage until ptxas compiles it",
                            hint="nvstage compile it with --cubin --resource-usage")
    if kind == "build":
        raise ArtifactError(f"{path} is a build: its kernels are read stage by stage",
                            hint="read it with inspect.gather.resources_of")
    images = image_bytes(path, toolkit, "cubin")
    loadable = [(im, d) for im, d in images if im.section in ("", ".nv_fatbin")]
    out: list[KernelRecord] = []
    seen: dict[bytes, list[KernelRecord]] = {}  # by the cubin's hash: copies run it once
    for im, data in loadable or images:
        # The container's word for the arch: it says "f" (sm_100f), the ELF cannot.
        key = (hashlib.sha256(data).digest(), im.arch_name)
        if key not in seen:
            cubin = read_cubin(data, f"{path} image {im.index}")
            source = "cuobjdump -res-usage" + (" (after device link)"
                                               if cubin.from_device_link else "")
            seen[key] = res_usage_of_cubin(data, toolkit,
                                           arch=refine_arch(cubin.arch, im.arch_name),
                                           final=not cubin.relocatable, source=source)
        out += seen[key]
    return out


# Where a record's spill figures come from (``KernelRecord.spill_source``).
SPILLS_FROM_REPORT = "ptxas -v"  # the build's own ptxas -v report, kept in its manifest
SPILLS_FROM_CUBIN = "cubin"  # the spills ptxas marked in the kernel's own code: its -v's rule
SPILLS_COUNTED = "SASS count"  # local stores and loads as the SASS has them: not ptxas's rule
# Each source in words, as the resources table's legend, a spill's warning and check say it.
SPILL_WORDS = {
    SPILLS_FROM_REPORT: "ptxas -v's report, kept in the build's manifest",
    SPILLS_FROM_CUBIN: "ptxas -v's figures: the stores and loads ptxas marked as spills in the "
                       "kernel's own code, read from the cubin",
    SPILLS_COUNTED: "the SASS's count of local stores and loads, not ptxas -v's figure",
}
# The same, short: beside a figure in a warning or check's message.
SPILL_SHORT = {SPILLS_FROM_REPORT: "ptxas -v's report", SPILLS_FROM_CUBIN: "ptxas -v's figures",
               SPILLS_COUNTED: "the SASS's count, not ptxas -v's"}


def _spills(f, reported: KernelRecord | None) -> tuple[int, int, str]:
    """(stores, loads, their source) of one kernel's figures: the build's own -v report where
    it has them; else the cubin's, by ptxas's rule where the manifest counted the
    subroutines apart (one from before did not: the SASS's count)."""
    if reported is not None and reported.spill_stores is not None:
        return reported.spill_stores, reported.spill_loads, SPILLS_FROM_REPORT

    exact = f.spill_kind == SPILL and f.subroutine_spill_stores is not None
    return f.spill_stores, f.spill_loads, SPILLS_FROM_CUBIN if exact else SPILLS_COUNTED


def from_figures(figures, *, arch: str | None = None, report: str = "") -> list[KernelRecord]:
    """Records from what ptxas wrote into its cubins (``compiler.cubin_figures``), as a build
    record keeps them: no tool runs. ``arch``: the arch the stage was asked for (the ELF
    cannot say "f"). ``report``: the user's own ptxas -v report (kept in the manifest), for
    its compile times and spill figures."""
    reported = {(r.kernel, r.arch): r
                for r in parse_ptxas_verbose(report, arch=arch)} if report else {}
    names = demangle_all(f.kernel for f in figures)
    out = []
    for f in figures:
        a = refine_arch(f.arch, arch)
        r = reported.get((f.kernel, a))
        ms = r.compile_ms if r is not None else None
        stores, loads, spill_source = _spills(f, r)
        out.append(KernelRecord(
            kernel=f.kernel, demangled=names[f.kernel], arch=a, registers=f.registers,
            spill_stores=stores, spill_loads=loads, stack_frame=f.stack_frame,
            shared_bytes=f.shared_bytes, constant_bytes=f.constant_bytes,
            local_bytes=f.local_bytes, barriers=f.barriers, compile_ms=ms,
            source=SOURCE + (" + ptxas -v" if r is not None else ""), final=f.final,
            shared_section_bytes=f.shared_section_bytes, spill_kind=f.spill_kind,
            spill_source=spill_source, subroutine_spill_stores=f.subroutine_spill_stores,
            subroutine_spill_loads=f.subroutine_spill_loads))
    return out


def _merge(p: KernelRecord, c: KernelRecord | None) -> KernelRecord:
    """ptxas' figures, completed by cuobjdump's (cmem[0] on sm_90+, local, the shared
    section)."""
    if c is None:
        return p
    return replace(
        p,
        constant_bytes=p.constant_bytes if p.constant_bytes is not None else c.constant_bytes,
        local_bytes=c.local_bytes, shared_section_bytes=c.shared_section_bytes,
        source=f"{p.source} + {c.source}")


# Stages whose cubins may come with a ptxas -v report: ptxas (in manifests from before the
# figures were read from its cubins, nvstage asked for it), NVRTC and nvJitLink (when
# --resource-usage asked; else cuobjdump's figures alone).
_COMPILERS = {"ptxas": "ptxas -v", "nvrtc": "NVRTC -Xptxas=-v", "nvjitlink": "nvJitLink -verbose"}


def build_resources(build, toolkit=None) -> list[KernelRecord]:
    """Resources for every kernel a ``Build`` compiled, joined from ptxas and cuobjdump.

    Whole-program builds give one final row per kernel and arch. ``-rdc`` builds give the
    per-file rows (``final=False``) and, when the build went through the device link, the
    final rows from the linked cubin (``source`` names where each number came from).
    """
    toolkit = reading_toolkit(build, toolkit)
    return [r for run in build.runs for r in stage_resources(run, toolkit)]


def stage_resources(run, toolkit) -> list[KernelRecord]:
    """The kernels one stage of a build compiled or linked (none for other stages)."""
    if not run.ok:
        return []
    rows: list[KernelRecord] = []
    if run.stage.kind is StageKind.PTXAS and run.figures is not None:
        return from_figures(run.figures, arch=run.stage.arch, report=run.resources or "")
    if run.stage.kind.value in _COMPILERS:
        cubins, arches = [], []
        for a in run.artifacts:
            if a.kind == "cubin":
                data = read_regular(a.path)
                cubins.append((data, read_cubin(data, a.path)))
                arches.append(a.arch or run.stage.arch)
        # -rdc -c numbers are not final. The cubin's ELF type says which it is; the argv
        # only when the cubin is gone.
        relocatable = any(c.relocatable for _, c in cubins) if cubins else \
            any(a in ("-c", "--compile-only") for a in run.stage.argv)
        # The -v report the build kept (never a rerun: a manifest's argv is data).
        ptxas = parse_ptxas_verbose(run.resources or "", arch=run.stage.arch,
                                    final=not relocatable,
                                    source=_COMPILERS[run.stage.kind.value])
        dumped: dict[tuple[str, str], KernelRecord] = {}
        for (data, cubin), declared in zip(cubins, arches):
            # ptxas -v names the arch as asked (sm_100f); the ELF cannot say "f"
            for r in res_usage_of_cubin(data, toolkit,
                                        arch=refine_arch(cubin.arch, declared),
                                        final=not cubin.relocatable):
                dumped[(r.kernel, r.arch)] = r
        for p in ptxas:
            rows.append(_merge(p, dumped.pop((p.kernel, p.arch), None)))
        rows += dumped.values()  # kernels with no -v report (a manifest from before it)
    elif run.stage.kind is StageKind.DEVICE_LINK:
        for a in run.artifacts:
            if a.kind != "cubin":
                continue
            data = read_regular(a.path)
            cubin = read_cubin(data, a.path)
            arch = refine_arch(cubin.arch, a.arch or run.stage.arch)
            linked = res_usage_of_cubin(data, toolkit, arch=arch,
                                        source="cuobjdump -res-usage (after device link)")
            nvlink = {r.kernel for r in parse_ptxas_verbose(
                run.stderr, arch=arch, source="nvlink -v")}
            # nvlink -v repeats the linked cubin's figures, but for a kernel with no
            # barriers it prints "used 3 barriers" (CUDA 13.5): the cubin is the reference.
            rows += [replace(r, source=f"nvlink -v + {r.source}") if r.kernel in nvlink
                     else r for r in linked]
    return rows
