"""``nvstage compile``'s command line: nvcc's whole grammar, plus nvstage's own options.

Every word is read with the grammar of the nvcc in use (``nvcc_args``), so ``-std=c++17``,
``-Xcompiler -O2``, ``-Xptxas=-v``, ``-rdc=true`` and ``--generate-code=...`` mean what they
mean to nvcc, and an option nvstage does not know goes to nvcc with its value. nvstage's own
options come first; where one shares a name with nvcc's, nvstage's meaning is the one taken:

=====================  ==========================================================
``-keep``/``--keep``   keep every intermediate in ``NAME.nvstage/`` with stages.json
``--keep-dir DIR``     ... in DIR (nvcc: keep them there; the same idea)
``-h``/``--help``      nvstage compile's help (``nvcc --help`` for nvcc's)
``-arch`` repeated     builds every arch named (nvcc keeps the last one); the launcher
                       (``nvstage nvcc ...``) keeps nvcc's meaning exactly
``--arch``,            aliases of ``-arch``, ``-gencode``, ``-o``, ``-rdc=true`` and
``--gencode``,         ``-lineinfo`` (nvcc itself knows only the one-dash spellings of the
``--output``, ``--rdc``, first two)
``--lineinfo``
=====================  ==========================================================

Only nvstage's options: ``--json``, ``--show``, ``--via``, ``--name-expr``, ``-j``/``--jobs``,
``--no-cache``, ``--nvcc``. A ``--`` ends nvstage's options: everything after it goes to nvcc.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from nvstage.compiler.nvcc.grammar import Arg, Grammar
from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.errors import UsageError

# What `nvstage compile -h` prints (the CLI writes it): nvstage's own options, by ``_OWN``.
COMPILE_HELP = """\
Usage: nvstage compile SOURCE [nvcc options] [nvstage options]

  Compile a .cu file as nvcc would, one stage at a time, timing each stage.

  nvstage asks nvcc for its own plan (--dryrun with your flags), runs every stage itself,
  and records each stage's tool, inputs, outputs, sizes and time. Any nvcc option works,
  spelt as nvcc spells it (-std=c++17, -Xcompiler -O2, -Xptxas=-v, -rdc=true,
  --generate-code=arch=compute_90,code=sm_90, --options-file FILE); nvcc judges it.

nvcc options nvstage reads itself (the rest go to nvcc unchanged):
  -o FILE, --output FILE     output file
  -arch ARCH, --arch ARCH    GPU arch (sm_90, sm_90a, compute_90, native). Repeated, every
                             arch named is built (nvcc itself keeps only the last one)
  -gencode SPEC              as nvcc: arch=compute_90,code=[sm_90,compute_90]; repeatable
  -c, -dc, -ptx, -cubin, -fatbin   stop points, as nvcc
  -rdc=true, --rdc           relocatable device code (adds the device-link stages)
  -O3, -I DIR, -D NAME=VALUE, -lineinfo, -maxrregcount=N, -dlto, --resource-usage

nvstage options:
  --keep, -keep              keep every intermediate and stages.json in NAME.nvstage/
                             (NAME from -o, else the source), as nvcc -keep keeps its files
  --keep-dir DIR             keep them in DIR instead; implies --keep
  --show SECTIONS            after the build, show what is inside: a comma list of ptx,
                             sass, resources, fatbin (or all)
  --via nvcc|nvrtc|triton    the staged nvcc driver (default), NVRTC + nvJitLink in-process,
                             or a Triton kernel's own stages (nvstage compile --via triton -h)
  --name-expr EXPR           --via nvrtc: a template kernel to instantiate, e.g. 'scale<float>'
  -j N, --jobs N             stages to run at once (default: one per core)
  --no-cache                 run every stage even when its inputs are unchanged
  --time-trace[=FILE]        nvcc's -fdevice-time-trace: where the compile's time went, as a
                             Chrome trace (OUT.json beside -o OUT; nvstage show FILE --time)
  --nvcc PATH                use this nvcc instead of the pip wheels' ($NVSTAGE_NVCC too)
  --json                     print the manifest (stages.json) to stdout; tables go to stderr
  -h, --help                 this help (nvcc --help lists nvcc's options)
  --                         everything after it goes to nvcc unchanged

Examples:
  nvstage compile kernels/vadd.cu -arch=sm_90 --keep
  nvstage compile kernels/multi.cu -c -arch sm_80 -arch sm_90 --keep
  nvstage compile kernels/multi.cu -c --generate-code=arch=compute_90,code=[sm_90,compute_90]
  nvstage compile kernels/saxpy.cu -cubin -arch=sm_90 -Xptxas -v
  nvstage compile kernels/saxpy.cu -ptx -o saxpy.ptx --json
"""


# nvstage's own options: spelling -> (field, takes a value, repeatable)
_OWN = {
    "--json": ("json", False, False), "--show": ("show", True, False),
    "--via": ("via", True, False), "--name-expr": ("name_exprs", True, True),
    "-j": ("jobs", True, False), "--jobs": ("jobs", True, False),
    "--no-cache": ("no_cache", False, False), "--nvcc": ("nvcc", True, False),
    "--keep": ("keep", False, False), "-keep": ("keep", False, False),
    "--keep-dir": ("keep_dir", True, False), "-keep-dir": ("keep_dir", True, False),
    "-h": ("help", False, False), "--help": ("help", False, False),
    "--output": ("output", True, False), "--arch": ("archs", True, True),
    "--gencode": ("gencodes", True, True), "--rdc": ("rdc", False, False),
    "--lineinfo": ("lineinfo", False, False),
}
# nvcc options that become CompileOptions fields (long names); the rest go to nvcc as given.
_ARCH, _GENCODE = "--gpu-architecture", "--generate-code"
_STOPS = {"--ptx": "ptx", "--cubin": "cubin", "--fatbin": "fatbin"}


@dataclass
class CompileRequest:
    """What ``nvstage compile ARGS`` asks for, before anything runs."""

    source: str | None = None
    options: CompileOptions = field(default_factory=CompileOptions)
    keep: bool = False
    keep_dir: str | None = None
    show: str | None = None
    via: str = "nvcc"
    name_exprs: tuple[str, ...] = ()
    jobs: int | None = None
    no_cache: bool = False
    nvcc: str | None = None
    json: bool = False
    help: bool = False

    @property
    def keep_folder(self) -> str | None:
        """Where the kept files go: --keep-dir, else ``NAME.nvstage`` named after -o (two
        builds of one source keep apart) or the source; None when nothing is kept."""
        if self.keep_dir is not None:
            return self.keep_dir
        if not self.keep:
            return None
        name = os.path.basename(self.options.output or self.source or "out")
        return f"{name.rsplit('.', 1)[0] if '.' in name else name}.nvstage"

    def keep_context(self):
        """The keep folder as a context: a temporary one (nvstage's own, removed after; the
        manifest names no keep folder) while --show reads the artifacts without --keep."""
        import contextlib
        import tempfile

        if self.keep_folder is not None or not self.show:
            return contextlib.nullcontext(self.keep_folder)
        return tempfile.TemporaryDirectory(prefix="nvstage-show-")


def nvcc_choice(argv: list[str], environ: dict[str, str] | None = None) -> str | None:
    """The ``--nvcc`` given (or ``$NVSTAGE_NVCC``): needed before the rest can be read, since
    the grammar is that nvcc's."""
    from nvstage.compiler.cache.command.compile_answer import nvcc_named

    return nvcc_named(argv, os.environ if environ is None else environ)


def wants_help(argv: list[str]) -> bool:
    """``-h``/``--help`` among nvstage's options: answered without finding a toolkit."""
    for w in argv:
        if w == "--":
            return False
        if w in ("-h", "--help"):
            return True
    return False


def parse(argv: list[str], grammar: Grammar) -> CompileRequest:
    """Read ``nvstage compile``'s arguments (without ``compile``) with ``grammar``."""
    req = CompileRequest()
    own: dict[str, object] = {"archs": [], "gencodes": [], "name_exprs": []}
    nvcc_words: list[str] = []
    i = 0
    while i < len(argv):
        w = argv[i]
        if w == "--":
            nvcc_words += argv[i + 1:]
            break
        name, eq, value = w.partition("=")
        if name == "--time-trace":  # nvstage's spelling of nvcc's -fdevice-time-trace
            nvcc_words += ["-fdevice-time-trace", value if eq else "-"]
            i += 1
            continue
        spec = _OWN.get(name) if w.startswith("-") else None
        if spec is None and w.startswith("-j") and w[2:].isdigit():
            spec, eq, value = _OWN["-j"], "=", w[2:]
        if spec is None:
            nvcc_words.append(w)
            i += 1
            continue
        dest, takes, repeat = spec
        if takes and not eq:
            if i + 1 >= len(argv):
                raise UsageError(f"{w} needs a value", hint=f"e.g. {w} {_EXAMPLE.get(dest, 'X')}")
            value = argv[i + 1]
            i += 1
        elif not takes and eq:
            raise UsageError(f"{name} takes no value")
        i += 1
        if repeat:
            own[dest].append(value)  # type: ignore[union-attr]
        else:
            own[dest] = value if takes else True
    return _build(req, own, grammar.parse(nvcc_words))


_EXAMPLE = {"jobs": "4", "show": "resources", "via": "nvrtc", "nvcc": "$CUDA_HOME/bin/nvcc",
            "keep_dir": "build.nvstage", "output": "out.o", "archs": "sm_90",
            "gencodes": "arch=compute_90,code=sm_90", "name_exprs": "'scale<float>'"}


def _build(req: CompileRequest, own: dict, args: list[Arg]) -> CompileRequest:
    fields: dict[str, object] = {"archs": list(own["archs"]), "gencodes": list(own["gencodes"]),
                                 "include_dirs": [], "defines": [], "extra": []}
    stops: list[str] = []
    inputs: list[str] = []
    for a in args:
        o = a.option
        if o is None:
            if a.is_input:
                inputs.append(a.words[0])
            else:
                fields["extra"] += list(a.words)  # unknown: nvcc says what it thinks of it
            continue
        if o.long == _ARCH:
            fields["archs"].append(a.value)
        elif o.long == _GENCODE:
            fields["gencodes"].append(a.value)  # one spec: its commas are its own
        elif o.long == "--output-file":
            fields["output"] = a.value
        elif o.long == "--compile":
            fields["compile_only"] = True
        elif o.long == "--device-c":
            fields["compile_only"] = fields["rdc"] = True
        elif o.long in _STOPS:
            stops.append(_STOPS[o.long])
        elif o.long == "--relocatable-device-code" and a.value in ("true", "false"):
            fields["rdc"] = a.value == "true"
        elif o.long == "--optimize" and a.value is not None:
            fields["opt_level"] = a.value
        elif o.long == "--generate-line-info":
            fields["lineinfo"] = True
        elif o.long == "--include-path" and a.value is not None:
            fields["include_dirs"] += a.value.split(",")
        elif o.long == "--define-macro" and a.value is not None:
            fields["defines"] += a.value.split(",")
        elif o.long == "--resource-usage":
            fields["resource_usage"] = True
        elif o.long == "--maxrregcount" and a.value is not None and a.value.isdigit():
            fields["maxrregcount"] = int(a.value)
        elif o.long == "--dlink-time-opt":
            fields["lto"] = True
        else:
            fields["extra"] += list(a.words)
    if len(stops) > 1:
        raise UsageError(f"choose one stop point, not {' and '.join('--' + s for s in stops)}")
    if stops:
        fields["stop"] = stops[0]
    if own.get("output") is not None:
        fields["output"] = own["output"]
    if own.get("rdc"):
        fields["rdc"] = True
    if own.get("lineinfo"):
        fields["lineinfo"] = True
    if len(inputs) > 1:
        raise UsageError(f"one source file at a time, not {len(inputs)}: {' '.join(inputs)}",
                         hint="compile each file on its own, or put nvstage in front of nvcc "
                              "(nvstage nvcc ...) for nvcc's multi-file modes")
    req.source = inputs[0] if inputs else None
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
    req.options = CompileOptions(**fields)
    req.keep = bool(own.get("keep")) or own.get("keep_dir") is not None
    req.keep_dir = own.get("keep_dir")  # type: ignore[assignment]
    req.show = own.get("show")  # type: ignore[assignment]
    req.via = own.get("via") or "nvcc"  # type: ignore[assignment]
    req.name_exprs = tuple(own["name_exprs"])
    if own.get("jobs") is not None:
        try:
            req.jobs = int(own["jobs"])  # type: ignore[arg-type]
        except ValueError:
            raise UsageError(f"-j {own['jobs']}: give a whole number of stages") from None
    req.no_cache = bool(own.get("no_cache"))
    req.nvcc = own.get("nvcc")  # type: ignore[assignment]
    req.json = bool(own.get("json"))
    req.help = bool(own.get("help"))
    return req
