"""``nvstage compile FILE.py --via triton``'s own small grammar (nvcc's means nothing to a
Python file): its help, its options and the request they make (``compiler.triton``'s
``TritonOptions``). The CLI (``cli/compile_triton.py``) parses with it and renders.
"""

from __future__ import annotations

from nvstage.errors import UsageError
from nvstage.extras import TRITON

TRITON_HELP = """\
Usage: nvstage compile FILE.py --via triton --kernel NAME --signature SIG [options]

  Compile one @triton.jit kernel through Triton's own stages (source -> ttir -> ttgir ->
  llir -> ptx -> cubin), timing each stage, with Triton's metadata (warps, stages, shared
  memory, target, FP fusion, which ptxas ran) in the same manifest as nvcc's.

  FILE.py is your own code: it is imported (run as Python) to find the kernel, as Triton
  itself does. A keep folder or a Triton cache folder is never imported.

Options:
  --kernel NAME              the @triton.jit function to compile
  --signature SIG            each parameter's type, as Triton's ASTSource takes it:
                             'x:*fp32,y:*fp32,n:i32' (constexprs go in --constexpr)
  --constexpr NAME=VALUE     a tl.constexpr parameter's value; repeatable (BLOCK=1024)
  --arch ARCH                sm_80, sm_90, sm_100, ... (default sm_75, nvcc's; Triton builds
                             sm_90a and newer with their 'a' features)
  --num-warps N              Triton's num_warps (its default 4): the block is N x 32 threads
  --num-stages N             Triton's num_stages (its default 3)
  --fp-fusion on|off         fuse multiplies and adds (FMA); unset: Triton's default, which
                             Triton 3.9 warns will change in 3.10 (the record says which)
  --ptxas triton|toolkit     the ptxas Triton ships (default), or nvstage's CUDA toolkit's
  -o FILE, --output FILE     copy the cubin here
  --keep                     keep every stage's file and stages.json in NAME.nvstage/ (NAME
                             from -o, else the kernel)
  --keep-dir DIR             keep them in DIR instead; implies --keep
  --show SECTIONS            after the build: ptx, sass, resources (or all)
  --nvcc PATH                the CUDA toolkit of this nvcc (its ptxas, cuobjdump, nvdisasm)
  --json                     print the manifest (stages.json) to stdout; tables go to stderr
  -h, --help                 this help

Needs Triton:
  """ + TRITON + """
Examples:
  nvstage compile kernels/triton/fusion_chain.py --via triton --kernel fused \\
      --signature 'x:*fp32,b:*fp32,y:*fp32,a:fp32,n:i32' --constexpr BLOCK=1024 \\
      --arch sm_90 --keep-dir fused.triton
  nvstage diff fused.triton chain.nvstage --block 256
"""

# spelling -> (field, takes a value, repeatable)
_OPTS = {
    "--via": ("via", True, False), "--kernel": ("kernel", True, False),
    "--signature": ("signature", True, False), "--constexpr": ("constexprs", True, True),
    "--arch": ("arch", True, False), "-arch": ("arch", True, False),
    "--num-warps": ("num_warps", True, False), "--num-stages": ("num_stages", True, False),
    "--fp-fusion": ("fp_fusion", True, False), "--ptxas": ("ptxas", True, False),
    "-o": ("output", True, False), "--output": ("output", True, False),
    "--keep": ("keep", False, False), "-keep": ("keep", False, False),
    "--keep-dir": ("keep_dir", True, False), "-keep-dir": ("keep_dir", True, False),
    "--show": ("show", True, False), "--nvcc": ("nvcc", True, False),
    "--json": ("json", False, False), "-h": ("help", False, False),
    "--help": ("help", False, False),
}


def parse(argv: list[str]) -> dict:
    """The command line as a dict of fields; ``UsageError`` naming a bad word."""
    got: dict = {"constexprs": [], "sources": []}
    i = 0
    while i < len(argv):
        w = argv[i]
        name, eq, value = w.partition("=") if w.startswith("--") else (w, "", "")
        spec = _OPTS.get(name)
        if spec is None:
            if w.startswith("-") and w != "-":
                raise UsageError(f"--via triton does not take {w}",
                                 hint="nvstage compile --via triton -h lists its options")
            got["sources"].append(w)
            i += 1
            continue
        dest, takes, repeat = spec
        if takes and not eq:
            if i + 1 >= len(argv):
                raise UsageError(f"{w} needs a value")
            value = argv[i + 1]
            i += 1
        elif not takes and eq:
            raise UsageError(f"{name} takes no value")
        i += 1
        if repeat:
            got[dest].append(value)
        else:
            got[dest] = value if takes else True
    return got


def _number(got: dict, key: str, flag: str) -> int | None:
    if got.get(key) is None:
        return None
    try:
        return int(got[key])
    except ValueError:
        raise UsageError(f"{flag} {got[key]!r}: give a whole number") from None


def request(got: dict):
    """(source, ``TritonOptions``, keep folder or None) from ``parse``'s fields."""
    from nvstage.compiler.triton.stages import TritonOptions, parse_constexpr, parse_signature
    if len(got["sources"]) != 1:
        raise UsageError("give one Python file" if not got["sources"] else
                         f"one Python file at a time, not {len(got['sources'])}",
                         hint="nvstage compile kernels/triton/fusion_chain.py --via triton "
                              "--kernel fused --signature ...")
    if not got.get("kernel"):
        raise UsageError("--via triton needs --kernel NAME (the @triton.jit function)")
    fusion = got.get("fp_fusion")
    if fusion not in (None, "on", "off"):
        raise UsageError(f"--fp-fusion {fusion!r}: choose on or off")
    options = TritonOptions(
        kernel=got["kernel"], signature=parse_signature(got.get("signature", "")),
        constexprs=tuple(parse_constexpr(c) for c in got["constexprs"]),
        arch=got.get("arch") or TritonOptions.arch,
        num_warps=_number(got, "num_warps", "--num-warps"),
        num_stages=_number(got, "num_stages", "--num-stages"),
        fp_fusion=None if fusion is None else fusion == "on",
        ptxas=got.get("ptxas", "triton"), output=got.get("output"))
    keep = got.get("keep_dir")
    if keep is None and got.get("keep"):
        import os

        stem = os.path.basename(options.output).rsplit(".", 1)[0] if options.output \
            else options.kernel
        keep = f"{stem}.nvstage"
    return got["sources"][0], options, keep
