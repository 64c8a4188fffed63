"""Why a command of a build missed the command cache, or fell back to plain nvcc
(``nvstage cache --explain BUILD``), as ccache's debug log tells.

A staged command's manifest in the build log carries what its key was made of
(``command_key``: ``summary``, taken when the command started, the key itself among it): nvcc's
real path, the folder, the keyed environment (digests; the values of the flag variables), the
toolkit's tools' stats, the options files' and host compilers' identity. A hit's entry replays
the manifest of the miss that made its result, and so carries the same. The words are the
entry's own (``argv``). What the preprocessing read is in the command entry under the key
(``cache/command/entry.py``: every file with its size and SHA-256, for each result), found again by the
run that made it (``run``).

For each command of the last build that missed, the nearest earlier entry of the same output is
compared with it, component by component in the key's order (``differences``); where the keys
are the same, the files each result read. A fallback's reason is the entry's own.

The build log and the cache's entries are documents like any other: read within bounds,
checked field by field; nothing read names a program, and a path is only ever joined under the
cache folder after it is checked to be a key or an id.
"""

from __future__ import annotations

import os
import re

from nvstage.compiler.nvcc import step_kind as steps

SUMMARY = "nvstage.command-key/1"
SCHEMA = "nvstage.explain/1"
# Variables whose values are flags, not places or secrets: shown as they were (cut), the rest
# told by a digest of their value.
SHOWN = frozenset({"NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN", "NVSTAGE_CACHE",
                   "SOURCE_DATE_EPOCH", "LANG", "LC_ALL", "LC_MESSAGES", "LC_CTYPE",
                   "PTXAS_FLAGS", "OCG_FLAGS", "NVVM_FLAGS", "NVLINK_FLAGS", "CUDAFE_FLAGS",
                   "FINALIZER_USE_LEGACY_ELF_BUILDER", "NVVM_IR_VER_CHK"})
_SHOWN_CHARS = 200
# What a summary read back may hold: a real one holds about 80 variables and 8 tools.
_MAX_ROWS = 1000
_MAX_TEXT = 4096
_KEY = re.compile(r"[0-9a-f]{64}")
_RID = re.compile(r"[0-9a-f]{16}")
_RUN = re.compile(r"[0-9a-f]{16}")


# -- what a key is made of, recorded with a miss -------------------------------------------

def summary(nvcc: str, args: list[str], cwd: str, env) -> dict:
    """What the command key of ``nvcc args`` is made of now (``cache/command/command_key.components``),
    small enough for every manifest: the key, or why there is none; ``run`` names this run
    (the command cache's result it stores carries it in its manifest)."""
    from nvstage import fsio
    from nvstage.compiler.cache.command.command_key import components, digest

    doc: dict = {"schema": SUMMARY, "run": os.urandom(8).hex()}
    parts = components(nvcc, args, cwd, env)
    if isinstance(parts, str):
        doc.update(key=None, why=parts)
        return doc
    real, place, _, keyed, tool_env, nvcc_env, tools, files, hosts = parts
    values = {}
    for name, value in [*keyed, *tool_env, *nvcc_env]:
        if value is None:
            values[name] = None
            continue
        row = {"sha": fsio.hexdigest(value.encode("utf-8", "surrogateescape"))[:16]}
        if name in SHOWN:
            row["value"] = value[:_SHOWN_CHARS]
        values[name] = row
    doc.update(key=digest(parts), nvcc=real,
               cwd=place if isinstance(place, str) else place[0],
               pwd=None if isinstance(place, str) else place[1], env=values,
               tools={t: st for t, st in tools}, options_files={n: sha for n, sha in files},
               host_compilers=[[c, st] for c, st in hosts])
    return doc


def _text(v, limit: int = _MAX_TEXT) -> bool:
    return isinstance(v, str) and len(v) <= limit and "\0" not in v


def _stat_row(v) -> bool:
    return v is None or isinstance(v, list) and len(v) == 4 and \
        all(isinstance(n, int) and not isinstance(n, bool) for n in v)


def read_summary(build) -> dict | None:
    """A manifest's ``command_key`` when it is one ``summary`` made (each field checked); None
    for a manifest without one (an older nvstage's) or a malformed one."""
    doc = build.get("command_key") if isinstance(build, dict) else None
    if not isinstance(doc, dict) or doc.get("schema") != SUMMARY or \
            not (_text(doc.get("run")) and _RUN.fullmatch(doc["run"])):
        return None
    if doc.get("key") is None:
        return {"run": doc["run"], "key": None,
                "why": doc["why"] if _text(doc.get("why")) else "no key"}
    env, tools, files, hosts = (doc.get(k) for k in ("env", "tools", "options_files",
                                                     "host_compilers"))
    ok = _text(doc["key"]) and _KEY.fullmatch(doc["key"]) and _text(doc.get("nvcc")) and \
        _text(doc.get("cwd")) and (doc.get("pwd") is None or _text(doc.get("pwd"))) and \
        isinstance(env, dict) and isinstance(tools, dict) and isinstance(files, dict) and \
        isinstance(hosts, list) and max(len(env), len(tools), len(files), len(hosts)) <= _MAX_ROWS
    if not ok:
        return None
    for name, row in env.items():
        if row is not None and not (isinstance(row, dict) and _text(row.get("sha"), 64) and
                                    (row.get("value") is None or _text(row.get("value")))):
            return None
    if not all(_text(t) and _stat_row(st) for t, st in tools.items()) or \
            not all(_text(n) and _text(sha, 64) for n, sha in files.items()) or \
            not all(isinstance(h, list) and len(h) == 2 and (h[0] is None or _text(h[0]))
                    and _stat_row(h[1]) for h in hosts):
        return None
    return doc


# -- comparing two commands ------------------------------------------------------------------

def _why(component: str, text: str) -> dict:
    return {"component": component, "text": text}


def _change(component: str, text: str, name, was, now) -> dict:
    """A reason that is one thing's change: ``name`` was ``was`` and is ``now``."""
    return {"component": component, "text": text, "name": name, "was": was, "now": now}


def _words(was: list[str], now: list[str]) -> list[dict]:
    """The word changes between two commands (``difflib``'s opcodes), first first."""
    import difflib

    out = []
    for op, a1, a2, b1, b2 in difflib.SequenceMatcher(None, was, now,
                                                      autojunk=False).get_opcodes():
        old, new = " ".join(was[a1:a2]), " ".join(now[b1:b2])
        if op == "replace":
            out.append(_change("argv", f"argv: {new} (was {old})", name=new, was=old, now=new))
        elif op == "insert":
            out.append(_change("argv", f"argv: {new} added", name=new, was=None, now=new))
        elif op == "delete":
            out.append(_change("argv", f"argv: {old} removed", name=old, was=old, now=None))
    return out


def _shown(row) -> str:
    if row is None:
        return "unset"
    return repr(row["value"]) if row.get("value") is not None else "set"


def _stat_text(was, now) -> str:
    if was is None:
        return "appeared"
    if now is None:
        return "is gone"
    if was[0] != now[0]:
        return f"changed ({was[0]} -> {now[0]} bytes)"
    return "changed (same size, another file or time)"


def differences(was_argv: list[str], was: dict, now_argv: list[str], now: dict) -> list[dict]:
    """How the key of one command (``now``, its words ``now_argv``) differs from an earlier
    one's, in the key's order: nvcc, the folder, the words, the environment, the toolkit's
    tools, the options files, the host compilers. Both are ``read_summary``'s."""
    out = []
    if was["nvcc"] != now["nvcc"]:
        out.append(_change("toolkit", f"toolkit: nvcc is {now['nvcc']} (was {was['nvcc']})",
                           name="nvcc", was=was["nvcc"], now=now["nvcc"]))
    for key in ("cwd", "pwd"):
        if was.get(key) != now.get(key):
            out.append(_change("folder", f"folder: built from {now.get(key)} (was {was.get(key)})"
                               if key == "cwd" else f"folder: $PWD is {now.get(key)} (was "
                               f"{was.get(key)})", name=key, was=was.get(key), now=now.get(key)))
    out += _words(was_argv[1:], now_argv[1:])
    for name in dict.fromkeys([*now["env"], *was["env"]]):
        a, b = was["env"].get(name), now["env"].get(name)
        if (a and a["sha"]) != (b and b["sha"]):
            out.append(_change("environment", f"environment: ${name} {_shown(b)} (was {_shown(a)})"
                               if name in SHOWN else
                               f"environment: ${name} changed (was {'set' if a else 'unset'}, "
                               f"now {'set' if b else 'unset'})", name=name,
                               was=a and a.get("value"), now=b and b.get("value")))
    for tool in dict.fromkeys([*now["tools"], *was["tools"]]):
        a, b = was["tools"].get(tool), now["tools"].get(tool)
        if a != b:
            out.append(_change("toolkit", f"toolkit: {tool} {_stat_text(a, b)}", name=tool,
                               was=a, now=b))
    for name in dict.fromkeys([*now["options_files"], *was["options_files"]]):
        a, b = was["options_files"].get(name), now["options_files"].get(name)
        if a != b:
            out.append(_change("options-file", f"options file {name} "
                               f"{'changed' if a and b else 'added' if b else 'removed'}",
                               name=name, was=a, now=b))
    a_hosts = {c: st for c, st in was["host_compilers"]}
    b_hosts = {c: st for c, st in now["host_compilers"]}
    for c in dict.fromkeys([*b_hosts, *a_hosts]):
        if a_hosts.get(c, False) != b_hosts.get(c, False):
            what = "is now used" if c not in a_hosts else "is no longer used" \
                if c not in b_hosts else _stat_text(a_hosts[c], b_hosts[c])
            out.append(_change("host-compiler", f"host compiler {c} {what}", name=c,
                               was=a_hosts.get(c), now=b_hosts.get(c)))
    return out


# -- the files each result read -----------------------------------------------------------

class _Entries:
    """The command entries of one cache folder, read as ``answer.load`` reads them
    (sealed under the user's key); each key's results by the run that made them."""

    def __init__(self, root: str | None, secret: bytes | None):
        self.root, self.secret = root, secret
        self._metas: dict = {}

    def results(self, k: str) -> tuple[dict | None, dict]:
        """(the entry's document, its results by run); (None, {}) where there is none."""
        if k in self._metas:
            return self._metas[k]
        got: tuple[dict | None, dict] = (None, {})
        if self.root is not None and self.secret is not None and _KEY.fullmatch(k):
            got = self._read(k)
        self._metas[k] = got
        return got

    def _read(self, k: str) -> tuple[dict | None, dict]:
        import json

        from nvstage.compiler.cache.command.answer import load
        from nvstage.compiler.buildlog.current import manifest
        from nvstage.compiler.store.layout import entry_dir

        try:
            meta = load(self.root, k, self.secret)
        except Exception:  # a damaged entry explains nothing; it is no error of the command
            meta = None
        if meta is None or not isinstance(meta.get("results"), list) or \
                not isinstance(meta.get("files"), list):
            return None, {}
        runs = {}
        for result in meta["results"][:64]:
            rid, sha = (result.get("id"), result.get("build_sha")) \
                if isinstance(result, dict) else (None, None)
            if not (isinstance(rid, str) and _RID.fullmatch(rid) and isinstance(sha, str)):
                continue
            raw = manifest(os.path.join(entry_dir(self.root, k), f"{rid}.build"), sha)
            try:
                doc = json.loads(raw) if raw is not None else None
            except (ValueError, RecursionError):
                doc = None
            got = read_summary(doc)
            if got is not None:
                runs[got["run"]] = result
        return meta, runs


def _files(meta: dict, result: dict) -> dict[str, tuple[int | None, str]]:
    """What ``result`` read: path -> (size, SHA-256), in the order recorded."""
    rows, out = meta["files"], {}
    for n in result.get("inputs", [])[:100_000]:
        try:
            path, st, _, sha = rows[n]
            out[str(path)] = (st[0] if isinstance(st, list) and st else None, str(sha))
        except (IndexError, TypeError, ValueError, KeyError):
            continue
    return out


def _now(paths) -> dict[str, tuple[int | None, str | None]]:
    from nvstage.compiler.cache.command.answer import sha256_file

    out = {}
    for p in paths:
        try:
            size = os.stat(p).st_size
        except OSError:
            out[p] = (None, None)
            continue
        out[p] = (size, sha256_file(p))
    return out


def _file_changes(was: dict, now: dict, source: str | None, cwd: str, *,
                  as_now: bool = False) -> list[dict]:
    """The files read differently: changed ones first, then those read only now, then those
    no longer read (``as_now``: ``now`` is the files as they are, not as the build read them)."""
    def named(p: str) -> str:
        shown = os.path.relpath(p, cwd) if p.startswith(cwd.rstrip("/") + "/") else p
        return f"{'source' if p == source else 'header'} {shown}"

    when = " (compared with the file as it is now)" if as_now else ""
    out = []
    for p, (size, sha) in was.items():
        if p in now and now[p][1] != sha:
            new_size = now[p][0]
            if new_size is None:
                text = f"{named(p)} is gone{when}"
            elif size != new_size:
                text = f"{named(p)} changed{when} ({size} -> {new_size} bytes)"
            else:
                text = f"{named(p)} changed{when} (same size, sha256 {sha[:12]} -> " \
                       f"{(now[p][1] or '?')[:12]})"
            out.append(_change("file", text, name=p, was=sha, now=now[p][1]))
    if not as_now:
        out += [_change("file", f"{named(p)} is read now (it was not)", name=p, was=None,
                        now=now[p][1]) for p in now if p not in was]
        out += [_change("file", f"{named(p)} is no longer read", name=p, was=sha, now=None)
                for p, (_, sha) in was.items() if p not in now]
    return out


# -- the explanation of a build -------------------------------------------------------------

def explain(path: str | os.PathLike, unit: str | None = None, cache_root: str | None = None,
            env=None) -> dict:
    """Why each command of the last build in the build log at ``path`` missed or fell back
    (``unit``: only the one whose output or source it names, or the end of its path).
    ``cache_root``: the cache folder its entries are in (``$NVSTAGE_CACHE_DIR``'s otherwise)."""
    from nvstage.compiler.buildlog import log as buildlog
    from nvstage.compiler.store.layout import cache_root as marked_root, secret
    from nvstage.errors import UsageError

    env = os.environ if env is None else env
    rec = buildlog.load_build_log(path)
    runs = buildlog.builds_of(rec.entries)
    # nvcc's commands (a link it ran is no cached command: status "ran")
    nvcc = [e for e in rec.entries if steps.is_nvcc(e.argv) and e.status != "ran"]
    doc: dict = {"schema": SCHEMA, "record": os.path.abspath(rec.folder), "build": None, "commands": 0,
                 "hits": 0, "missed": 0, "fell_back": 0, "failed": 0, "units": [],
                 "skipped": rec.skipped}
    if not runs:
        return doc
    last = runs[-1]
    doc["build"] = last.number
    mine = [e for e in last.entries if steps.is_nvcc(e.argv) and e.status != "ran"]
    chosen = mine if unit is None else _named(mine, unit)
    if unit is not None and not chosen:
        raise UsageError(f"no nvcc command of the last build in {rec.folder} is {unit!r}",
                         hint="give its object's or source's path (or the end of it): " +
                              ", ".join(_name(e) for e in mine[:8]))
    # Only a folder nvstage marked as its own is read (``store/layout.cache_root``).
    root = marked_root(env if cache_root is None else
                       {**env, "NVSTAGE_CACHE_DIR": os.fspath(cache_root)})
    entries = _Entries(root, secret(env) if root is not None else None)
    build_of = {id(e): r.number for r in runs for e in r.entries}
    for e in chosen:
        doc["commands"] += 1
        if e.status == "ok" and e.hit:
            doc["hits"] += 1
            continue
        status = {"ok": "miss", "fallback": "fallback", "failed": "failed"}[e.status]
        doc[{"miss": "missed", "fallback": "fell_back", "failed": "failed"}[status]] += 1
        earlier = next((p for p in reversed(nvcc) if p.unit == e.unit and p.started < e.started
                        and p is not e), None)
        whys = _explained(e, status, earlier, entries)
        row = {"name": _name(e), "output": e.output, "source": e.source, "status": status,
               "file": e.file, "why": whys[0], "differences": whys[1:],
               "earlier": None if earlier is None else
               {"file": earlier.file, "build": build_of.get(id(earlier)),
                "status": "hit" if earlier.hit and earlier.status == "ok" else
                "miss" if earlier.status == "ok" else earlier.status}}
        doc["units"].append(row)
    return doc


def _name(e) -> str:
    """The command's output as the build named it (relative to the folder it ran in), else
    the command itself."""
    from nvstage.compiler.buildlog.log import command_text

    out = e.output
    if out is None:
        return command_text(e.argv, limit=200)
    return os.path.relpath(out, e.cwd) if out.startswith(e.cwd.rstrip("/") + "/") else out


def _named(entries: list, text: str) -> list:
    want = text.strip()
    absolute = os.path.abspath(want)

    def names(e):
        return [p for p in (e.output, e.source, e.file) if p]

    exact = [e for e in entries if absolute in names(e) or want in names(e)]
    return exact or [e for e in entries
                     if any(p.endswith("/" + want.lstrip("/")) for p in names(e))]


def _explained(e, status: str, earlier, entries: _Entries) -> list[dict]:
    """The reasons, the first first: why ``e`` fell back, or how it differs from ``earlier``."""
    if status in ("fallback", "failed"):
        reason = e.reason or "no reason recorded"
        return [_why("fallback" if status == "fallback" else "failed",
                     reason if status == "fallback" else f"it failed: {reason}")]
    now = read_summary(e.build)
    if now is not None and now["key"] is None:
        return [_why("no-key", f"no key: {now['why']} (every build of it runs the stages)")]
    if earlier is None:
        return [_why("first", "first build of this output (no earlier entry in the build "
                              "record)")]
    if earlier.status == "fallback":
        return [_why("earlier-fallback", "the earlier build ran it with plain nvcc, which "
                     f"leaves no entry: {earlier.reason or 'no reason recorded'}")]
    if earlier.status == "failed":
        return [_why("earlier-failed", f"the earlier build of it failed "
                     f"({earlier.reason or 'no reason recorded'})")]
    was = read_summary(earlier.build)
    if was is not None and was["key"] is None:
        return [_why("no-key", f"the earlier build had no key: {was['why']}")]
    if now is None or was is None:
        which = "this build's" if now is None else "the earlier build's"
        words = _words(earlier.argv[1:], e.argv[1:])
        return words or [_why("unknown", f"{which} entry records no key (an older nvstage "
                                         "wrote it): the words are the same")]
    diffs = differences(earlier.argv, was, e.argv, now)
    if diffs:
        return diffs
    # The same key: what the preprocessing read differs, or the earlier result is gone.
    meta, runs = entries.results(now["key"])
    source = e.source
    if meta is not None and was["run"] in runs:
        before = _files(meta, runs[was["run"]])
        if now["run"] in runs:
            changes = _file_changes(before, _files(meta, runs[now["run"]]), source, e.cwd)
            return changes or [_why("hiding", "the same key and the same files read: a new "
                                    "file where the preprocessor looks for a header, or a search "
                                    "folder that moved")]
        changes = _file_changes(before, _now(before), source, e.cwd, as_now=True)
        return changes or [_why("hiding", "the same key and files as the earlier entry; this "
                                "build's result was not kept to compare with")]
    return [_why("gone", "the same key as the earlier build, whose result is not in the cache "
                 "(evicted, cleared, or never kept: __TIME__, .incbin, a file changed while it "
                 "compiled)" if entries.root is not None else
                 "the same key as the earlier build; no cache folder to look its result up in")]
