"""A workload file (TOML, or the same data as a dict) read into the records of ``spec``.

Every table and key is checked as it is read: an unknown one, a wrong type or a value out of
range is a ``WorkloadError`` that names the file, the table and the key.
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nvstage.files import kind_of_mode, shown_path
from nvstage.errors import ExprError, WorkloadError
from nvstage.run.workload.expr import parse_expr
from nvstage.run.workload.flags import SAFE_FLAGS
from nvstage.run.workload.spec import (CODE_KINDS, DTYPES, MAX_LAUNCH_ENTRIES, MAX_REPS,
                                       SCALARS, Arg, BufferArg, BufferSpec, CheckSpec,
                                       CodeSpec, Init, Launch, Scalar, Workload, locate)
from nvstage.documents import load_toml_doc
from nvstage.run.workload.triton import read_builds, launch_shape

# Flags a workload cannot give: the run chooses the arch and compiles to a cubin or fatbin.
_DECIDED = re.compile(r"^--?(?:arch|gpu-architecture|code|gpu-code|gencode|generate-code|rdc"
                      r"|relocatable-device-code|dc|device-c|dlto|dlink-time-opt|x|G"
                      r"|device-debug)(?:=.*)?$")
SCHEMA_KEYS = ("kernel", "params", "buffers", "transfer", "launch", "run", "check")
# Tables other commands read from the same file (nvstage model's byte and FLOP counts).
FOREIGN_KEYS = ("model",)


def read_toml(path: str | os.PathLike, what: str = "workload",
              error: type[WorkloadError] = WorkloadError) -> dict:
    """A TOML file as a dict: a missing file is ``InputNotFound``; a folder, a binary file or
    bad TOML is ``error``."""
    return load_toml_doc(path, what, error)


class Reader:
    """TOML-shaped data to a ``Workload``, every key checked (``Workload.from_dict``)."""

    def __init__(self, data: Mapping, base: Path, file: str | None):
        self.data, self.base, self.file = data, base, file

    def where(self, table: str, key: str | None = None) -> str:
        return locate(self.file, table, key)

    def err(self, msg: str, table: str, key: str | None = None, hint: str | None = None):
        return WorkloadError(msg, where=self.where(table, key), hint=hint)

    def table(self, name: str, required: bool = False) -> Mapping:
        t = self.data.get(name)
        if t is None:
            if required:
                raise WorkloadError(f"missing [{name}] table", where=self.file or "workload")
            return {}
        if not isinstance(t, Mapping):
            raise self.err("must be a table", name)
        return t

    def unknown(self, table: str, t: Mapping, allowed: tuple[str, ...]) -> None:
        for k in t:
            if k not in allowed:
                raise self.err(f"unknown key {k!r}", table, k,
                               hint=f"allowed here: {', '.join(allowed)}")

    def path(self, value, table: str, key: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.err("must be a file path (a string)", table, key)
        if "\0" in value:  # no system call takes one: os.stat would raise ValueError
            raise self.err("a file path cannot hold a NUL byte", table, key)
        try:
            p = (self.base / value).resolve()
            mode = os.stat(p).st_mode
        except FileNotFoundError:
            raise self.err(f"no such file: {shown_path(value)} (looked in "
                           f"{shown_path(p.parent)})", table, key) from None
        except (OSError, ValueError) as e:  # a name too long, a loop of links, no access
            raise self.err(f"cannot use {shown_path(value)}: "
                           f"{getattr(e, 'strerror', None) or e}", table, key) from None
        if not stat.S_ISREG(mode):  # a FIFO or device would block or never end
            raise self.err(f"{value} is not a regular file ({p} is {kind_of_mode(mode)})",
                           table, key, hint="a workload names regular files only")
        return str(p)

    def read(self, name: str) -> Workload:
        for k in self.data:
            if k not in SCHEMA_KEYS and k not in FOREIGN_KEYS:
                raise WorkloadError(f"unknown table [{k}]", where=self.file or "workload",
                                    hint=f"the tables are: {', '.join(SCHEMA_KEYS)}")
        code = self.code()
        params = self.params()
        buffers = self.buffers()
        names = {b.name for b in buffers}
        transfer = self.table("transfer")
        self.unknown("transfer", transfer, ("to_device", "from_device"))
        to_dev = self.name_list(transfer.get("to_device", sorted(names)), "transfer",
                                "to_device", names)
        from_dev = self.name_list(transfer.get("from_device", []), "transfer", "from_device",
                                  names)
        launches = self.launches(names, {p for p, _ in params}, code.triton)
        run = self.table("run")
        self.unknown("run", run, ("reps", "warmup"))
        reps = self.positive_int(run.get("reps", 10), "run", "reps")
        warmup = self.positive_int(run.get("warmup", 2), "run", "warmup", allow_zero=True)
        check = self.check(names, set(from_dev))
        w = Workload(name=name, code=code, params=params, buffers=buffers,
                     to_device=to_dev, from_device=from_dev, launches=launches, reps=reps,
                     warmup=warmup, check=check, file=self.file)
        w.check_work()  # repeat, reps and warmup together, not one at a time
        return w

    def code(self) -> CodeSpec:
        t = self.table("kernel", required=True)
        self.unknown("kernel", t, (*CODE_KINDS, "stop", "defines", "include_dirs", "flags"))
        if "triton" in t:
            return self.triton(t)
        given = [k for k in CODE_KINDS if k in t]
        packaged = [k for k in given if k != "ptx"]
        if not given:
            raise self.err("say where the device code is: source, cubin, fatbin or ptx",
                           "kernel")
        if len(packaged) > 1:
            raise self.err(f"give one of source, cubin or fatbin, not {' and '.join(packaged)}",
                           "kernel")
        kind = packaged[0] if packaged else "ptx"
        ptx = self.path(t["ptx"], "kernel", "ptx") if "ptx" in t else None
        path = ptx if kind == "ptx" else self.path(t[kind], "kernel", kind)
        stop = t.get("stop", "cubin")
        if stop not in ("cubin", "fatbin"):
            raise self.err(f"stop must be cubin or fatbin, not {stop!r}", "kernel", "stop")
        if kind == "source" and ptx:
            raise self.err("a source is compiled to PTX by nvstage; drop the ptx key",
                           "kernel", "ptx")
        defines = self.str_list(t.get("defines", []), "kernel", "defines")
        incs = tuple(str((self.base / d).resolve())
                     for d in self.str_list(t.get("include_dirs", []), "kernel",
                                            "include_dirs"))
        flags = self.flags(t.get("flags", []))
        if flags and kind != "source":
            raise self.err(f"flags are nvcc's, for a source: {kind} code is already compiled",
                           "kernel", "flags")
        return CodeSpec(kind, path, ptx if kind != "ptx" else None, stop, defines, incs,
                        flags=flags)

    def flags(self, value) -> tuple[str, ...]:
        """nvcc flags for the source, each one word from the list a budgets file's [compile]
        extra accepts (a workload is a document: no flag that names a program to run or a
        file to write), less those the run decides (the arch, the output's kind)."""
        words = self.str_list(value, "kernel", "flags")
        for w in words:
            if not SAFE_FLAGS.fullmatch(w) or _DECIDED.match(w):
                raise self.err(
                    f"{w[:80]!r} is not a flag a workload may give nvcc"
                    + (" (the arch and the output's kind come from --gpu/--arch and nvstage)"
                       if SAFE_FLAGS.fullmatch(w) else
                       " (it could name a program to run or a file to write)"),
                    "kernel", "flags",
                    hint='one word each, e.g. flags = ["--use_fast_math", "-O3", '
                         '"-maxrregcount=64", "--std=c++17", "-DN=4"]; '
                         "include folders and defines also have their own keys")
        return words

    def triton(self, t: Mapping) -> CodeSpec:
        """Kept Triton builds (keep folders of nvstage compile --via triton), never Python."""
        other = [k for k in t if k != "triton"]
        if other:
            raise self.err(f"kept Triton builds are the whole code: drop {other[0]}", "kernel",
                           other[0], hint="a Triton kernel's launch shape and parameters come "
                                          "from its build")
        kernels = read_builds(t["triton"], self.base, self.where("kernel", "triton"))
        return CodeSpec("triton", kernels[0].folder, triton=kernels)

    def params(self) -> tuple[tuple[str, Any], ...]:
        t = self.table("params")
        out = []
        for k, v in t.items():
            if not k.isidentifier():
                raise self.err("a parameter name must be an identifier", "params", k)
            if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                raise self.err("must be a number or an expression string", "params", k)
            out.append((k, v))
        return tuple(out)

    def buffers(self) -> tuple[BufferSpec, ...]:
        t = self.table("buffers")
        out = []
        for bname, spec in t.items():
            table = f"buffers.{bname}"
            if not bname.isidentifier() or bname in ("np", "numpy"):
                raise self.err("a buffer name must be an identifier (not np)", table)
            if not isinstance(spec, Mapping):
                raise self.err("must be a table with dtype and count", table)
            self.unknown(table, spec, ("dtype", "count", "init"))
            dtype = spec.get("dtype")
            if dtype not in DTYPES:
                raise self.err(f"unknown dtype {dtype!r}", table, "dtype",
                               hint=f"one of: {', '.join(DTYPES)}")
            if "count" not in spec:
                raise self.err("missing element count", table, "count")
            count = spec["count"]
            if isinstance(count, bool) or not isinstance(count, (int, str)):
                raise self.err("must be an integer or an expression string", table, "count")
            out.append(BufferSpec(bname, dtype, count, self.init(spec.get("init", "zeros"),
                                                                 table, dtype)))
        return tuple(out)

    def init(self, v, table: str, dtype: str = "float32") -> Init:
        if v == "zeros":
            return Init("zeros")
        if not isinstance(v, Mapping) or len(v) != 1:
            raise self.err('must be "zeros" or one of {random = {...}}, {range = {...}}, '
                           '{fill = V}, {npy = "file.npy"}', table, "init")
        (kind, arg), = v.items()
        if kind == "fill":
            if isinstance(arg, bool) or not isinstance(arg, (int, float)):
                raise self.err("fill takes a number", table, "init.fill")
            try:
                value = float(arg)
            except OverflowError:
                raise self.err("fill is too large for any dtype", table, "init.fill") from None
            # NaN and inf are values a float buffer can hold; an integer one cannot.
            if not dtype.startswith("float") and not math.isfinite(value):
                raise self.err(f"fill is {value}: a {dtype} buffer holds finite integers",
                               table, "init.fill")
            return Init("fill", value=value)
        if kind == "npy":
            return Init("npy", path=self.path(arg, table, "init.npy"))
        if kind in ("random", "range"):
            arg = arg if isinstance(arg, Mapping) else {}
            allowed = ("seed", "low", "high") if kind == "random" else ("start", "step")
            self.unknown(f"{table}.init.{kind}", arg, allowed)
            nums = {}
            for k, val in arg.items():
                if isinstance(val, bool) or not isinstance(val, (int, float)):
                    raise self.err("must be a number", f"{table}.init.{kind}", k)
                if k == "seed":
                    if not isinstance(val, int) or not 0 <= val < 2**64:
                        raise self.err("a seed is an integer from 0 to 2**64 - 1",
                                       f"{table}.init.{kind}", k)
                    nums[k] = val
                    continue
                # inf or nan here reached int() or numpy's generator when the run started
                if isinstance(val, int) and val.bit_length() > 1000 or \
                        not math.isfinite(float(val)):
                    raise self.err("must be a finite number", f"{table}.init.{kind}", k)
                nums[k] = float(val)
                if kind == "random" and not dtype.startswith("float"):
                    import numpy as np

                    info = np.iinfo(dtype)
                    if not info.min <= nums[k] <= info.max:
                        raise self.err(f"{val} does not fit in {dtype}",
                                       f"{table}.init.{kind}", k)
            return Init(kind, **nums)
        raise self.err(f"unknown initial contents {kind!r}", table, "init",
                       hint="zeros, random, range, fill or npy")

    def name_list(self, v, table, key, names: set[str]) -> tuple[str, ...]:
        items = self.str_list(v, table, key)
        for n in items:
            if n not in names:
                raise self.err(f"no buffer named {n!r}", table, key,
                               hint=f"buffers: {', '.join(sorted(names)) or '(none)'}")
        return items

    def str_list(self, v, table, key) -> tuple[str, ...]:
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self.err("must be a list of strings", table, key)
        if any("\0" in x for x in v):  # each becomes an nvcc argument, a path or a name
            raise self.err("a string here cannot hold a NUL byte", table, key)
        return tuple(v)

    def positive_int(self, v, table, key, allow_zero=False) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < (0 if allow_zero else 1) \
                or v > MAX_REPS:
            raise self.err(f"must be an integer {'>= 0' if allow_zero else '>= 1'} and at "
                           f"most {MAX_REPS}", table, key)
        return v

    def dims(self, v, table, key) -> tuple[str | int, ...]:
        items = v if isinstance(v, list) else [v]
        if not 1 <= len(items) <= 3:
            raise self.err("give 1 to 3 dimensions", table, key)
        for x in items:
            if isinstance(x, bool) or not isinstance(x, (int, str)):
                raise self.err("each dimension is an integer or an expression", table, key)
        return tuple(items)

    def launches(self, buffers: set[str], params: set[str],
                 triton: tuple = ()) -> tuple[Launch, ...]:
        raw = self.data.get("launch")
        if raw is None:
            raise WorkloadError("no [[launch]] entries: nothing to run",
                                where=self.file or "workload")
        if not isinstance(raw, list):
            raise WorkloadError("launch must be an array of tables ([[launch]])",
                                where=self.file or "workload")
        if len(raw) > MAX_LAUNCH_ENTRIES:
            raise WorkloadError(f"{len(raw)} [[launch]] entries: more than the "
                                f"{MAX_LAUNCH_ENTRIES} nvstage reads from one workload "
                                "(MAX_LAUNCH_ENTRIES)", where=self.file or "workload",
                                hint="use repeat = N for a launch made many times")
        out = []
        for i, t in enumerate(raw):
            table = f"launch[{i}]"
            if not isinstance(t, Mapping):
                raise self.err("must be a table", table)
            self.unknown(table, t, ("kernel", "grid", "block", "shared", "args", "repeat"))
            for req in ("kernel", "grid") + (() if triton else ("block",)):
                if req not in t:
                    raise self.err(f"missing {req}", table, req)
            if not isinstance(t["kernel"], str):
                raise self.err("must be a kernel name", table, "kernel")
            shared = t.get("shared", 0)
            if isinstance(shared, bool) or not isinstance(shared, (int, str)):
                raise self.err("must be an integer or an expression", table, "shared")
            args = t.get("args", [])
            if not isinstance(args, list):
                raise self.err("must be a list", table, "args")
            launch = Launch(
                kernel=t["kernel"], grid=self.dims(t["grid"], table, "grid"),
                block=self.dims(t.get("block", 1), table, "block"),
                args=tuple(self.arg(a, table, j, buffers) for j, a in enumerate(args)),
                shared=shared,
                repeat=self.positive_int(t.get("repeat", 1), table, "repeat"),
            )
            if triton:

                launch = launch_shape(launch, t, triton, self.where(table))
            out.append(launch)
        return tuple(out)

    def arg(self, a, table: str, j: int, buffers: set[str]) -> Arg:
        key = f"args[{j}]"
        if isinstance(a, str):
            if a not in buffers:
                raise self.err(f"no buffer named {a!r} (a scalar is written {{i32 = \"n\"}})",
                               table, key)
            return BufferArg(a)
        if isinstance(a, Mapping):
            tags = [k for k in a if k in SCALARS]
            extra = [k for k in a if k not in SCALARS and k != "counts"]
            if len(tags) != 1 or extra:
                raise self.err("a scalar is one typed value, e.g. {i32 = \"n\"} or "
                               "{f32 = 2.0}", table, key,
                               hint=f"types: {', '.join(SCALARS)}")
            tag = tags[0]
            expr = a[tag]
            if isinstance(expr, bool) or not isinstance(expr, (int, float, str)):
                raise self.err("must be a number or an expression", table, f"{key}.{tag}")
            counts = None
            if "counts" in a:
                counts = self.name_list(a["counts"], table, f"{key}.counts", buffers)
            return Scalar(tag, expr, counts)
        raise self.err("an argument is a buffer name or a typed scalar", table, key)

    def check(self, buffers: set[str], returned: set[str]) -> CheckSpec:
        t = self.table("check")
        self.unknown("check", t, ("expect", "rtol", "atol"))
        expect = t.get("expect", {})
        if not isinstance(expect, Mapping):
            raise self.err("must be a table of buffer = expression", "check", "expect")
        pairs = []
        for b, e in expect.items():
            if b not in buffers:
                raise self.err(f"no buffer named {b!r}", "check.expect", b)
            if b not in returned:
                raise self.err(f"{b} is not copied back; add it to [transfer] from_device",
                               "check.expect", b)
            if not isinstance(e, str):
                raise self.err("must be an expression string", "check.expect", b)
            try:
                parse_expr(e)
            except ExprError as err:
                raise self.err(str(err), "check.expect", b) from None
            pairs.append((b, e))
        tol = {}
        for k in ("rtol", "atol"):
            if k in t:
                v = t[k]
                if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                    raise self.err("must be a non-negative number", "check", k)
                tol[k] = float(v)
        return CheckSpec(tuple(pairs), **tol)
