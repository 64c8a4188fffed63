"""nvcc's ``--dryrun`` text -> a typed plan of stages. Pure: no files, no processes.

nvcc prints every line of its plan on stderr behind ``#$ ``: first ``NAME=value`` lines (the
environment it gives its tools, from nvcc.profile), then one command per line, shell-quoted.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from enum import Enum

from nvstage.compiler.nvcc import shellwords
from nvstage.errors import PlanError, ShellWordsError

PREFIX = "#$ "
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)


class StageKind(str, Enum):
    HOST_PREPROCESS = "host-preprocess"
    CUDAFE = "cudafe++"
    DEVICE_PREPROCESS = "device-preprocess"
    CICC = "cicc"
    PTXAS = "ptxas"
    FATBINARY = "fatbinary"
    HOST_COMPILE = "host-compile"
    DEVICE_LINK = "device-link"
    DLINK_FATBINARY = "dlink-fatbinary"
    DLINK_COMPILE = "dlink-compile"
    LINK = "link"
    LIBRARY = "library"
    CLEANUP = "cleanup"
    # nvcc's "-- Filter Dependencies -- > FILE" for -MD/-MMD: no program, done in-process
    # (depfile.py) from the preprocessed outputs.
    DEPFILE = "depfile"
    # The runtime-compilation path (NVRTC and nvJitLink, in-process through cuda-python).
    NVRTC = "nvrtc"
    NVJITLINK = "nvjitlink"
    # Triton's own stages (``compiler/triton/stages.py``): Python source -> TTIR (the front end),
    # optimised TTIR, TritonGPU IR, LLVM IR, PTX (LLVM's NVPTX back end); then ptxas.
    TRITON_SOURCE = "source"
    TTIR = "ttir"
    TTGIR = "ttgir"
    LLIR = "llir"
    LLVM_PTX = "ptx"
    OTHER = "other"

    def __str__(self) -> str:  # so f-strings and tables print the value
        return self.value


# Options whose value is the next word (so that word is not a positional input).
_TAKES_VALUE = frozenset(
    """-o -include -imacros -isystem -iquote -idirafter -I -D -U -x -L -l -Xlinker -MF -MT -MQ
    -arch --orig_src_file_name --orig_src_path_name --include_file_name --module_id_file_name
    --gen_c_file_name --stub_file_name --gen_device_file_name --host-ccbin -maxrregcount
    --gpu-name -O -lto -Xptxas""".split()
)
# Output-naming options, as separate words or ``--opt=value``.
_OUTPUT_OPTS = ("-o", "--create", "--embedded-fatbin", "--register-link-binaries",
                "--gen_c_file_name", "--gen_device_file_name")
_CUDA_TOOLS = {"cudafe++", "cicc", "ptxas", "fatbinary", "nvlink", "rm", "nvcc", "bin2c",
               "nvprune", "cuobjdump"}
# nvcc -lib runs its archiver as "`gcc -print-prog-name=ar`" cr LIB OBJ...: a command
# substitution, which only a shell would perform. Nothing here runs a shell, so the stage names
# the program itself ("ar"), found on PATH like every other tool.
_PROG_NAME = re.compile(r"^`\s*\S+\s+-print-prog-name=([^`\s]+)\s*`$")


@dataclass
class Stage:
    index: int  # 1-based order in nvcc's plan
    kind: StageKind
    tool: str  # basename of argv[0]
    argv: list[str]
    arch: str | None = None  # sm_90 / compute_90 where the stage is per-arch
    inputs: list[str] = field(default_factory=list)  # as written in the plan (may be relative)
    outputs: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        d = asdict(self)
        d["kind"] = self.kind.value
        return d

    @classmethod
    def from_json(cls, d: dict) -> Stage:
        d = dict(d)
        d["kind"] = StageKind(d["kind"])
        return cls(**d)


@dataclass
class Plan:
    variables: dict[str, str]  # NAME=value lines, in order; given to every stage as environment
    stages: list[Stage]
    # What nvcc said while planning besides the plan ("nvcc warning : Cannot find valid GPU for
    # '-arch=native', default arch is used"): plain nvcc shows it, so must we.
    messages: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"variables": self.variables, "stages": [s.to_json() for s in self.stages],
                "messages": self.messages}

    @classmethod
    def from_json(cls, d: dict) -> Plan:
        return cls(dict(d["variables"]), [Stage.from_json(s) for s in d["stages"]],
                   list(d.get("messages", ())))  # manifests written before messages existed

    @property
    def runnable(self) -> list[Stage]:
        return [s for s in self.stages if s.kind is not StageKind.CLEANUP]


def parse_dryrun(text: str) -> Plan:
    """Parse nvcc's ``--dryrun`` stderr. Lines not starting with ``#$ `` are ignored."""
    variables: dict[str, str] = {}
    stages: list[Stage] = []
    messages: list[str] = []
    seen_command = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        if not raw.startswith(PREFIX):
            if raw.strip():
                messages.append(raw.rstrip())
            continue
        body = raw[len(PREFIX):]
        m = _ASSIGN.match(body)
        if m and not seen_command:
            variables[m.group(1)] = m.group(2).rstrip()
            continue
        try:
            argv = shellwords.split(body, variables)
        except ShellWordsError as e:
            raise PlanError(f"nvcc plan line {lineno} cannot be split: {e}: {body!r}") from e
        if not argv:
            continue
        seen_command = True
        stages.append(classify(len(stages) + 1, _without_redirections(argv)))
    for s in stages:
        if s.kind is StageKind.DEPFILE:  # it reads every preprocessed output before it
            earlier = [t for t in stages if t.index < s.index]
            s.inputs = [o for t in earlier if t.kind is StageKind.DEVICE_PREPROCESS
                        for o in t.outputs[:1]]
            s.inputs += [o for t in earlier if t.kind is StageKind.HOST_PREPROCESS
                         for o in t.outputs[:1]]
    if not stages:
        raise PlanError(
            "nvcc printed no plan (no '#$ ' command lines)",
            hint="run the same nvcc command with --dryrun yourself to see what it says",
        )
    return Plan(variables, stages, messages)


_DEPFILE_LINE = ["--", "Filter", "Dependencies", "--"]


def _without_redirections(argv: list[str]) -> list[str]:
    """A plan line less nvcc's own capture of a tool's output (``> TMP_stdout 2>TMP_stderr``,
    printed with ``--threads``): a shell would perform it; nvstage captures every tool's
    output itself. Only that exact form is taken, so no file name is ever mistaken for one."""
    out = list(argv)
    if len(out) >= 3 and out[-3] == ">" and out[-2].endswith("_stdout") and \
            out[-1].startswith("2>") and out[-1].endswith("_stderr"):
        del out[-3:]
    return out


def classify(index: int, argv: list[str]) -> Stage:
    """Name a command by its tool and flags, and pick out its inputs, outputs and arch."""
    if argv[:4] == _DEPFILE_LINE:
        outs = argv[5:6] if len(argv) >= 6 and argv[4] == ">" else []
        return Stage(index, StageKind.DEPFILE, "nvcc", list(argv), None, [], outs)
    m = _PROG_NAME.match(argv[0])
    if m:
        argv = [m.group(1), *argv[1:]]
    tool = os.path.basename(argv[0])
    args = argv[1:]
    kind = _kind(tool, args)
    stage = Stage(index, kind, tool, list(argv), _arch(tool, args))
    stage.outputs = _outputs(tool, args)
    stage.inputs = [p for p in _inputs(tool, args) if p not in stage.outputs]
    return stage


def _kind(tool: str, args: list[str]) -> StageKind:
    if tool == "rm":
        return StageKind.CLEANUP
    if tool == "cudafe++":
        return StageKind.CUDAFE
    if tool == "cicc":
        return StageKind.CICC
    if tool == "ptxas":
        return StageKind.PTXAS
    if tool == "fatbinary":
        return StageKind.DLINK_FATBINARY if "-link" in args else StageKind.FATBINARY
    if tool == "nvlink":
        return StageKind.DEVICE_LINK
    if tool in ("ar", "nvprune") or tool in _CUDA_TOOLS:
        return StageKind.LIBRARY if tool == "ar" else StageKind.OTHER
    # Anything else is the host compiler (gcc, g++, clang, whatever -ccbin named).
    if "-E" in args:
        if any(a.startswith("-D__CUDA_ARCH__=") for a in args):
            return StageKind.DEVICE_PREPROCESS
        return StageKind.HOST_PREPROCESS
    if "-c" in args:
        if any(os.path.basename(p) == "link.stub" for p in args):
            return StageKind.DLINK_COMPILE
        return StageKind.HOST_COMPILE
    return StageKind.LINK


def _opt_value(args: list[str], name: str) -> list[str]:
    """All values of option ``name``, written ``name value`` or ``name=value``."""
    vals = []
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            vals.append(args[i + 1])
        elif a.startswith(name + "="):
            vals.append(a[len(name) + 1:])
    return vals


def _arch(tool: str, args: list[str]) -> str | None:
    if tool not in _CUDA_TOOLS and "-E" not in args:
        return None  # host compile and link: __CUDA_ARCH__ there is nvcc bookkeeping
    for a in ("-arch", "--arch", "--gpu-name"):
        vals = _opt_value(args, a)
        if vals:
            return vals[-1]
    for a in args:
        if a.startswith("-D__CUDA_ARCH__="):
            value = a.split("=", 1)[1]
            return f"compute_{int(value) // 10}" if value.isdigit() else None
    return None


def _outputs(tool: str, args: list[str]) -> list[str]:
    if tool == "ar":  # ar OPERATIONS ARCHIVE MEMBER...
        return args[1:2]
    outs: list[str] = []
    for opt in _OUTPUT_OPTS:
        outs += _opt_value(args, opt)
    if tool == "cudafe++":
        gen_c = _opt_value(args, "--gen_c_file_name")
        for stub in _opt_value(args, "--stub_file_name"):
            # cudafe++ writes the stub beside the generated .cpp, which #includes it by name.
            if gen_c and not os.path.isabs(stub) and os.path.dirname(stub) == "":
                stub = os.path.join(os.path.dirname(gen_c[-1]), stub)
            outs.append(stub)
    if tool == "cicc":
        outs += _opt_value(args, "--stub_file_name")
    if "--gen_module_id_file" in args:  # cudafe++ normally; cicc when it runs alone (--ptx)
        outs += _opt_value(args, "--module_id_file_name")
    return list(dict.fromkeys(outs))


def _inputs(tool: str, args: list[str]) -> list[str]:
    if tool == "ar":
        return list(dict.fromkeys(args[2:]))
    ins: list[str] = []
    skip = False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a in _TAKES_VALUE:
            skip = True
            continue
        if a.startswith("-"):
            for key in ("-DFATBINFILE=", "-DREGISTERLINKBINARYFILE="):
                if a.startswith(key):
                    ins.append(a[len(key):].strip('"'))
            if a.startswith(("--image3=", "--image=")):
                for part in a.split(","):
                    if part.startswith("file="):
                        ins.append(part[len("file="):])
            continue
        ins.append(a)
    if tool in ("cicc", "cudafe++") and "--gen_module_id_file" not in args:
        ins += _opt_value(args, "--module_id_file_name")
    return list(dict.fromkeys(ins))
