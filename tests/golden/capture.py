"""The --json output of every command on the bundled kernels and examples, normalised, so that a
change of layout can be shown to change no behaviour (tests/golden/test_golden_json.py).

    python tests/golden/capture.py --write    # after a deliberate change of output

Normalised: times and measured durations, absolute paths (the scratch folder, the repository,
the toolkit), cache counters, file sizes and hashes of outputs that carry nvcc's per-run module
id (and the names derived from it), and host facts (doctor's versions and paths).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "data" / "golden"
K, E = "{root}/kernels", "{root}/examples"

# name -> argv after "nvstage" (in order: later commands read what earlier ones built)
COMMANDS: list[tuple[str, list[str]]] = [
    ("compile-vadd-exe", ["compile", f"{K}/vadd.cu", "--arch", "sm_90", "-o", "vadd", "--keep"]),
    ("compile-multi-gencodes", ["compile", f"{K}/multi.cu", "-c", "--gencode",
                                "arch=compute_80,code=sm_80", "--gencode",
                                "arch=compute_90,code=[sm_90,compute_90]", "--keep"]),
    ("compile-saxpy-ptx", ["compile", f"{K}/saxpy.cu", "--ptx", "--arch", "sm_90"]),
    ("compile-saxpy-cubin", ["compile", f"{K}/saxpy.cu", "--cubin", "--arch", "sm_90", "-o",
                             "saxpy.cubin"]),
    ("compile-multi-rdc", ["compile", f"{K}/multi.cu", "-c", "--rdc", "--arch", "sm_90", "-o",
                           "multi_rdc.o", "--keep"]),
    ("compile-templates-nvrtc", ["compile", f"{K}/templates.cu", "--via", "nvrtc",
                                 "--name-expr", "scale<float>", "--cubin", "--arch", "sm_90"]),
    ("show-cubin", ["show", "saxpy.cubin"]),
    ("show-keep", ["show", "vadd.nvstage"]),
    ("show-object", ["show", "multi.o"]),
    ("occupancy-block", ["occupancy", "saxpy.cubin", "--block", "256", "--gpu", "h200"]),
    ("occupancy-sweep", ["occupancy", "saxpy.cubin", "--sweep", "--gpu", "a100"]),
    ("diff-builds", ["diff", "multi.nvstage", "multi_rdc.nvstage"]),
    ("diff-paths", ["diff", f"{K}/saxpy.cu", "--via", "nvcc,nvrtc", "--arch", "sm_90"]),
    ("run-dry", ["run", f"{E}/run/saxpy.toml", "--dry-run", "--json", "-"]),
    ("run-dry-multi", ["run", f"{E}/run/multi.toml", "--dry-run", "--json", "-"]),
    ("model", ["model", f"{E}/model/chain_unfused.toml", "--gpu", "h200"]),
    ("compare", ["compare", f"{E}/model/chain_unfused.toml", f"{E}/model/chain_fused.toml",
                 "--gpu", "h200"]),
    ("check-source", ["check", f"{K}/multi.cu", "--config", f"{E}/budgets.toml"]),
    ("check-keep", ["check", "vadd.nvstage", "--config", f"{E}/budgets.toml"]),
    ("cache", ["cache"]),
]

_TIME_KEY = re.compile(r"(seconds|_s|_ns|ns|_ms|started|wall|elapsed|time|duration|median|p25|"
                       r"p75|min|max|iqr|mean)$")
_VOLATILE_KEY = {"sha256", "size", "stored_size", "bytes_stored", "hits", "misses", "stored",
                 "direct_hits", "corrupt", "made_again", "entries", "total_bytes", "hit_rate",
                 "cached", "dir", "evicted", "critical_path", "stored_bytes",
                 "uncompressed_bytes"}  # the longest chain follows measured times
# Measured text inside strings, and temporary folders (tempfile's random names).
_TEXT = [(re.compile(r"Compile time = [\d.]+ ms"), "Compile time = <t> ms")]
_MODULE_ID = re.compile(r"(_[0-9a-f]{8}_[0-9a-f]{2,}_[A-Za-z0-9_]+?_[0-9a-f]{8}|"
                        r"__nv_module_id_[0-9a-f_]+|tmpxft_[0-9a-f_]+|[0-9a-f]{24,})")


# The commands' own $TMPDIR (``capture``) is replaced by this first; tempfile's folders in it
# by "<tmp>" (their names are random).
_TMP = "<T>"
# nvcc's plan records PATH: the same one on every machine (gcc is in /usr/bin).
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_TEMP_NAMES = re.compile(re.escape(_TMP) + r"/(nvstage|tmp)[-.\w]*")


def normalise(obj, subs: list[tuple[str, str]]):
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k in _VOLATILE_KEY or (_TIME_KEY.search(k) and isinstance(v, (int, float))):
                out[k] = "<v>" if v is not None else None
            elif _TIME_KEY.search(k) and isinstance(v, dict):  # {"a": s, "b": s, "delta": s}
                out[k] = {kk: "<v>" if isinstance(vv, (int, float)) else normalise(vv, subs)
                          for kk, vv in v.items()}
            else:
                out[k] = normalise(v, subs)
        return out
    if isinstance(obj, list):
        return [normalise(v, subs) for v in obj]
    if isinstance(obj, str):
        for old, new in subs:
            obj = obj.replace(old, new)
        for pattern, new in _TEXT:
            obj = pattern.sub(new, obj)
        obj = _TEMP_NAMES.sub("<tmp>", obj)
        return _MODULE_ID.sub("<id>", obj)
    if isinstance(obj, float):
        return round(obj, 6)
    return obj


def capture(work: Path) -> dict[str, dict]:
    """Run every command in ``work`` (a fresh folder) and return name -> normalised result."""
    # Their own temporary folder beside ``work``, whatever $TMPDIR the caller has.
    tmp = work.parent / f"{work.name}-tmp"
    tmp.mkdir(exist_ok=True)
    env = dict(os.environ, NVSTAGE_CACHE_DIR=str(work / ".cache"), COLUMNS="120",
               NO_COLOR="1", TMPDIR=str(tmp), PATH=_PATH)
    from nvstage.compiler.toolkit.locate import find_toolkit

    tk = find_toolkit()
    subs = sorted({(str(tmp), _TMP), (str(tmp.resolve()), _TMP),
                   (str(work), "<work>"), (str(work.resolve()), "<work>"),
                   (str(ROOT), "<root>"), (tk.root, "<toolkit>"),
                   (os.path.realpath(tk.root), "<toolkit>")}, key=lambda s: -len(s[0]))
    out = {}
    for name, argv in COMMANDS:
        argv = [a.format(root=ROOT) for a in argv]
        if "--json" not in argv:
            argv.append("--json")
        cp = subprocess.run([sys.executable, "-m", "nvstage", *argv], cwd=work, env=env,
                            capture_output=True, text=True, timeout=600)
        try:
            doc = json.loads(cp.stdout)
        except ValueError:
            doc = {"stdout": cp.stdout[-2000:], "stderr": cp.stderr[-2000:]}
        out[name] = {"exit": cp.returncode, "json": normalise(doc, subs)}
    return out


def main() -> int:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="nvstage-golden-") as tmp:
        (Path(tmp) / "work").mkdir()
        got = capture(Path(tmp) / "work")
    if "--write" in sys.argv:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        for name, doc in got.items():
            (GOLDEN / f"{name}.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(got)} files to {GOLDEN}")
    else:
        print(json.dumps(got, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
