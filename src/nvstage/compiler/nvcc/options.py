"""Compile options as a frozen record, turned into nvcc flags by a table, not an if-chain."""

from __future__ import annotations

import functools
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Literal

from nvstage import proc
from nvstage.errors import ToolMissing, UnknownArch, UsageError

Stop = Literal["ptx", "cubin", "fatbin"]
_ARCH = re.compile(r"^(sm|compute|lto)_(\d+)([af]?)$")
_GENCODE = re.compile(r"^arch=(compute_\d+[af]?),code=(\[?[\w,]+\]?)$")


@dataclass(frozen=True)
class CompileOptions:
    """What to ask nvcc for. ``None``/empty means "not given": nvcc's default applies."""

    archs: tuple[str, ...] = ()  # -arch=sm_90 (repeatable: several -arch flags)
    gencodes: tuple[str, ...] = ()  # -gencode arch=compute_90,code=[sm_90,compute_90]
    output: str | None = None  # -o
    compile_only: bool = False  # -c
    stop: Stop | None = None  # --ptx / --cubin / --fatbin
    rdc: bool = False  # -rdc=true
    opt_level: str | None = None  # -O0..-O3 (host); device opt follows nvcc's defaults
    lineinfo: bool = False  # -lineinfo
    include_dirs: tuple[str, ...] = ()  # -I
    defines: tuple[str, ...] = ()  # -D NAME or NAME=VALUE
    resource_usage: bool = False  # --resource-usage: ptxas -v on every ptxas stage
    maxrregcount: int | None = None  # -maxrregcount=N
    lto: bool = False  # -dlto: device link-time optimisation (LTO-IR instead of SASS)
    extra: tuple[str, ...] = field(default=())  # passed to nvcc unchanged

    def __post_init__(self):
        for a in self.archs:
            if not _ARCH.match(a) and a not in ("native", "all", "all-major"):
                raise UnknownArch(
                    f"unknown arch {a!r}",
                    hint="use a name like sm_90 or compute_90 (nvstage doctor lists them)",
                )
        for g in self.gencodes:
            if not _GENCODE.match(g.replace(" ", "")):
                raise UsageError(
                    f"malformed --gencode {g!r}",
                    hint="write it as nvcc does: arch=compute_90,code=[sm_90,compute_90]",
                )
        if self.opt_level is not None and self.opt_level not in ("0", "1", "2", "3"):
            raise UsageError(f"-O{self.opt_level} is not an optimisation level",
                             hint="use 0, 1, 2 or 3")
        if self.stop and self.compile_only:
            raise UsageError(f"--{self.stop} and -c are different stop points: choose one")

    def nvcc_args(self) -> list[str]:
        """The nvcc flags these options stand for (input file and -o not included)."""
        return render_flags(_FLAGS, self)

    def given(self, name: str) -> bool:
        """Whether option ``name`` was given (None, False and () mean "not given")."""
        return getattr(self, name) not in (None, False, ())

    @property
    def arch_names(self) -> list[str]:
        """Every real or virtual arch named, for validation."""
        names = list(self.archs)
        for g in self.gencodes:
            m = _GENCODE.match(g.replace(" ", ""))
            if m:
                names.append(m.group(1))
                names += [c for c in m.group(2).strip("[]").split(",") if c]
        return names


    def to_json(self) -> dict:
        return asdict(self)


def _arch_flags(archs: tuple[str, ...]) -> list[str]:
    """One arch as nvcc's ``-arch``; several as one ``-gencode`` each, since nvcc keeps only
    the last ``-arch`` and nvstage promises every arch named: sm_NN[a|f] as
    arch=compute_NN[a|f],code=[sm_NN[a|f],compute_NN[a|f]] (what -arch=sm_NN means),
    compute_NN as PTX alone, lto_NN as LTO-IR."""
    if len(archs) == 1:
        return [f"-arch={archs[0]}"]
    out: list[str] = []
    for a in archs:
        m = _ARCH.match(a)
        if m is None:  # native, all, all-major: nvcc picks the set; it cannot be one of many
            raise UsageError(f"-arch={a} cannot be combined with other archs",
                             hint=f"give -arch={a} alone, or name each arch")
        kind, num, suffix = m.groups()
        virtual = f"compute_{num}{suffix}"
        code = {"sm": f"[sm_{num}{suffix},{virtual}]", "compute": virtual,
                "lto": f"lto_{num}{suffix}"}[kind]
        out += ["-gencode", f"arch={virtual},code={code}"]
    return out


_FLAGS = {
    "archs": _arch_flags,
    "gencodes": lambda v: [x for g in v for x in ("-gencode", g.replace(" ", ""))],
    "compile_only": lambda v: ["-c"],
    "stop": lambda v: [f"--{v}"],
    "rdc": lambda v: ["-rdc=true"],
    "opt_level": lambda v: [f"-O{v}"],
    "lineinfo": lambda v: ["-lineinfo"],
    "include_dirs": lambda v: [x for d in v for x in ("-I", d)],
    "defines": lambda v: [x for d in v for x in ("-D", d)],
    "resource_usage": lambda v: ["--resource-usage"],
    "maxrregcount": lambda v: [f"-maxrregcount={v}"],
    "lto": lambda v: ["-dlto"],
    "extra": lambda v: list(v),
}


def render_flags(table: dict, options: CompileOptions) -> list[str]:
    """Flags for every given option that ``table`` renders (field name -> value -> flags):
    the nvcc path's table, or the NVRTC and nvJitLink ones."""
    out: list[str] = []
    for f in fields(options):
        render = table.get(f.name)
        if render is not None and options.given(f.name):
            out += render(getattr(options, f.name))
    return out


@functools.lru_cache(maxsize=8)
def supported_archs(nvcc: str) -> tuple[str, ...]:
    """Real and virtual archs this nvcc accepts (``--list-gpu-code`` and ``--list-gpu-arch``)."""
    names: list[str] = []
    for flag in ("--list-gpu-code", "--list-gpu-arch"):
        try:
            text = proc.output([nvcc, flag], timeout=60)
        except ToolMissing:  # no answer (or too slow): check_archs leaves it to nvcc
            return ()
        names += [w for w in text.split() if _ARCH.match(w)]
    return tuple(dict.fromkeys(names))


def check_archs(opts: CompileOptions, nvcc: str) -> None:
    names = [n for n in opts.arch_names if n not in ("native", "all", "all-major")]
    if not names:
        return  # nothing named: no need to ask nvcc for its list
    known = supported_archs(nvcc)
    if not known:
        return  # an nvcc that cannot list its archs: let it judge for itself
    for name in names:
        # nvcc's lists name no arch-specific (sm_90a) or family (sm_100f) targets, though it
        # builds them: one whose base it lists is left for nvcc to judge.
        m = _ARCH.match(name)
        if name not in known and m and m.group(3) and f"{m.group(1)}_{m.group(2)}" in known:
            continue
        # Nor LTO targets (lto_90): one whose compute_NN it lists is nvcc's to judge (its
        # refusal of one without -rdc=true is then said in its own words).
        if name not in known and m and m.group(1) == "lto" and f"compute_{m.group(2)}" in known:
            continue
        if name not in known:
            sms = sorted((k for k in known if k.startswith("sm_")),
                         key=lambda k: int(_ARCH.match(k).group(2)))
            raise UnknownArch(
                f"unsupported gpu architecture {name!r} for this nvcc",
                hint=f"choose one of: {', '.join(sms)} (or compute_NN for PTX)",
            )
