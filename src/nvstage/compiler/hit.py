"""The warm path: a whole nvcc command answered from the cache, no process started.

In a build of hundreds of translation units most commands are hits, and a hit is what users
feel: this module answers one with the standard library alone (no typer, rich, cuda-python or
numpy, and little of nvstage), before anything else is imported.

A command's key hashes what decides its outputs without reading a source: the nvcc named and
the toolkit's tools (by path, size, mtime, ctime and inode), the host compiler nvcc would
find, the current folder, the words of the command (options files by content), and the
environment nvcc and gcc read. Under the key, an entry made when the command last ran through
the stage pipeline lists every file the preprocessor read (the line markers of each
preprocessed output: the source and each header, system ones included) with its stat and
SHA-256, the places where a new file would hide one of those headers (``headers.py``) and the
search folders' layout, the output files (object, PTX, cubin, dependency file) and what the
tools printed. A hit needs every file unchanged (the stat alone where it was settled when
recorded, else the contents, as ccache's race rule does), no new hiding file and the same
layout; then the outputs are copied into place, checked against their SHA-256 on the way, and
what the tools printed is printed again. Anything else is a miss: the pipeline runs (its stage
cache still saves what it can) and records a new entry.

Entries are sealed like the stage cache's (HMAC-SHA256 under the user's key, ``seal.py``) and
live in the stage cache's folder under ``inv/``, only in a folder nvstage marked as its own.
"""

from __future__ import annotations

import marshal
import os
import stat
import sys

from nvstage import fsio

# What this module imports is what a hit costs before it does anything: the standard library
# that ``fsio`` imports, and marshal, whose bytes are only read after their HMAC checks out
# (marshal is no format for untrusted data).

# /3: entries from before hold objects whose cubins note a -v nvstage gave ptxas.
SCHEMA = f"nvstage.invocation/3 marshal {marshal.version}"
# The environment nvcc, its tools and gcc read (gcc's include and locale variables; nvcc's own
# flags): any change is another key. The variables nvcc's profile and binary name (INCLUDES,
# PTXAS_FLAGS, OCG_FLAGS, ...) are keyed too, taken from the toolkit in use (``env_names``).
ENV = ("PATH", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN", "CPATH",
       "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "GCC_EXEC_PREFIX", "COMPILER_PATH",
       "LIBRARY_PATH", "SOURCE_DATE_EPOCH", "LANG", "LC_ALL", "LC_MESSAGES", "LC_CTYPE",
       "NVSTAGE_CACHE", "NVSTAGE_BASE_DIR")
# The toolkit, relative to the folder above nvcc's bin/: what nvcc runs and reads itself.
TOOLS = ("bin/nvcc", "bin/nvcc.profile", "bin/cudafe++", "bin/ptxas", "bin/fatbinary",
         "bin/nvlink", "nvvm/bin/cicc", "nvvm/libdevice/libdevice.10.bc")
_OPTF = ("--options-file", "-optf")
MAX_META = 16 << 20
MAX_OUTPUT = 1 << 30
# A file changed this close to the moment its stat was taken may change again within the
# same timestamp tick: its stat is not trusted, its contents are compared (ccache's rule).
_SETTLE_NS = 2_000_000_000
# The stages a command answered whole may have run (nvcc's -c, -ptx, -cubin, -fatbin).
_ANSWERABLE = frozenset({"host-preprocess", "cudafe++", "device-preprocess", "cicc", "ptxas",
                         "fatbinary", "host-compile", "cleanup", "depfile"})
HITS = "hits"  # under inv/: one line per whole answer, the stage hits it stands for


def _stat(path: str):
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _which(name: str, path_var: str) -> str | None:
    for d in path_var.split(os.pathsep):
        p = os.path.join(d or ".", name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def _host_compilers(words: list[str], env) -> list[str | None]:
    """The host compilers nvcc may run: each -ccbin's (the command's, its options files' and
    $NVCC_PREPEND_FLAGS/$NVCC_APPEND_FLAGS' alike), else $NVCC_CCBIN's, else gcc on PATH."""
    given = []
    it = iter(words)
    for a in it:
        if a in ("-ccbin", "--compiler-bindir"):
            given.append(next(it, ""))
        elif a.startswith(("-ccbin=", "--compiler-bindir=")):
            given.append(a.split("=", 1)[1])
    if not given and env.get("NVCC_CCBIN"):
        given.append(env["NVCC_CCBIN"])
    out = []
    for ccbin in given:
        if os.path.isdir(ccbin):
            out.append(_which("gcc", ccbin) or _which("g++", ccbin) or ccbin)
        else:
            out.append(ccbin if os.sep in ccbin else _which(ccbin, env.get("PATH", "")))
    return out or [_which("gcc", env.get("PATH", ""))]


# Words in $NVCC_PREPEND_FLAGS/$NVCC_APPEND_FLAGS that name a file the key must read: only
# then are they split (shlex costs a hit the re module).
_ENV_FILE_WORDS = ("optf", "options-file", "ccbin", "compiler-bindir")
# gcc writes its dependency file as a side effect where these name one: no entry restores it.
SIDE_ENV = ("DEPENDENCIES_OUTPUT", "SUNPRO_DEPENDENCIES")


def env_flags(env, name: str) -> list[str]:
    """The words of ``$NVCC_PREPEND_FLAGS`` or ``$NVCC_APPEND_FLAGS`` (``name``), as nvcc reads
    them: shell words, or plain blanks where the quoting does not parse."""
    import shlex

    value = env.get(name) or ""
    try:
        return shlex.split(value)
    except ValueError:
        return value.split()


def _env_words(env, name: str) -> list[str]:
    value = env.get(name) or ""
    return env_flags(env, name) if any(w in value for w in _ENV_FILE_WORDS) else []


def key(nvcc: str, args: list[str], cwd: str, env) -> str | None:
    """The command's key; None when it cannot be keyed without reading what a miss reads
    (a tool is missing, an options file that names another or is no small regular file) or
    when what it writes is more than the entry holds (gcc's $DEPENDENCIES_OUTPUT)."""
    if any(env.get(v) for v in SIDE_ENV):
        return None
    h = fsio.sha256(SCHEMA.encode())
    # The words nvcc reads, for the files they name: the environment's flags around the
    # command's (their text is keyed with the environment; the files they name, here).
    words = [*_env_words(env, "NVCC_PREPEND_FLAGS"), *args,
             *_env_words(env, "NVCC_APPEND_FLAGS")]
    try:
        real = os.path.realpath(nvcc)
        root = os.path.dirname(os.path.dirname(real))
        parts = [real, cwd, args, [[k, env.get(k)] for k in ENV],
                 [[k, env[k]] for k in env_names(real, env) if k in env]]
        parts.append([[t, _stat(os.path.join(root, t))] for t in TOOLS
                      if os.path.exists(os.path.join(root, t))])
        files = []
        opt_words: list[str] = []
        for i, a in enumerate(words):
            name = None
            if a in _OPTF and i + 1 < len(words):
                name = words[i + 1]
            elif a.startswith(tuple(o + "=" for o in _OPTF)):
                name = a.split("=", 1)[1]
            if name is not None:
                for n in name.split(","):
                    # Whole, from a regular file only (a FIFO would block the hit; the
                    # launcher reads no options file over 1 MiB).
                    data = fsio.read_or_none(os.path.join(cwd, n), 1 << 20, follow=True)
                    if data is None or b"-optf" in data or b"--options-file" in data:
                        return None  # one level is keyed by content; deeper is the miss path's
                    files.append([n, fsio.sha256(data).hexdigest()])
                    if b"ccbin" in data or b"compiler-bindir" in data:
                        opt_words += data.decode("utf-8", "surrogateescape").split()
        parts.append(files)
        parts.append([[c, _stat(c) if c and os.path.exists(c) else None]
                      for c in _host_compilers([*words, *opt_words], env)])
    except (OSError, ValueError):
        return None
    # repr of lists of str, int and None: one spelling per value, as JSON would give.
    h.update(repr(parts).encode("utf-8", "surrogateescape"))
    return h.hexdigest()


_env_memo: dict = {}


def env_names(real_nvcc: str, env) -> tuple[str, ...]:
    """The variables nvcc reads beside ``ENV`` (``nvcc_env``: from its profile and binary),
    remembered per nvcc identity: in the process, and as a sealed note in the cache folder
    (a hit reads one small file; working them out reads nvcc's 35 MB)."""
    from nvstage.compiler import nvcc_env

    ident = nvcc_env.identity(real_nvcc)
    got = _env_memo.get(ident)
    if got is not None:
        return got
    opened = _opened(env)
    path = None
    if opened is not None:
        path = os.path.join(opened[0], "inv", "env",
                            fsio.sha256(ident.encode("utf-8", "surrogateescape")).hexdigest())
        note = fsio.read_sealed(path, opened[1], 1 << 20)
        if isinstance(note, list) and len(note) == 2 and note[0] == nvcc_env.SCHEMA \
                and isinstance(note[1], tuple) and all(isinstance(n, str) for n in note[1]):
            _env_memo[ident] = note[1]
            return note[1]
    got = nvcc_env.derive(real_nvcc)
    if path is not None:
        fsio.write_sealed(path, opened[1], [nvcc_env.SCHEMA, got])
    _env_memo[ident] = got
    return got


def cache_root(env) -> str | None:
    """The stage cache's folder, as ``paths.cache_dir`` names it, if nvstage marked it."""
    raw = env.get("NVSTAGE_CACHE_DIR")
    if raw:
        if not raw.strip():
            return None
        root = os.path.expanduser(raw)
    else:
        xdg = env.get("XDG_CACHE_HOME", "")
        base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "nvstage")
    try:
        with open(os.path.join(root, "CACHEDIR.TAG"), "rb") as f:
            if b"# nvstage stage cache" not in f.read(4096):
                return None
    except OSError:
        return None
    return root


def _secret(env) -> bytes | None:
    """The cache's key as ``seal.py`` keeps it; None when there is none (nothing to trust)."""
    xdg = env.get("XDG_CONFIG_HOME", "")
    base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".config")
    raw = fsio.read_or_none(os.path.join(base, "nvstage", "cache.key"), 4096)
    raw = raw.strip() if raw is not None else b""
    return raw if len(raw) >= 16 else None  # the file's bytes are the key, as seal.py reads


def _entry_dir(root: str, k: str) -> str:
    return os.path.join(root, "inv", k[:2], k)


def load(root: str, k: str, secret: bytes) -> dict | None:
    """The entry under ``k`` if its seal holds."""
    meta = fsio.read_sealed(os.path.join(_entry_dir(root, k), "meta"), secret, MAX_META)
    return meta if isinstance(meta, dict) and meta.get("schema") == SCHEMA else None


def _sha256_file(path: str) -> str | None:
    data = fsio.read_or_none(path, MAX_OUTPUT, follow=True)  # a header may be a link
    return None if data is None else fsio.hexdigest(data)


def inputs_unchanged(meta: dict, entry: str | None = None) -> bool:
    """Every file the preprocessor read is as recorded, no new file hides one of them, and
    the search folders are what they were."""
    for path, st, settled, sha in meta["inputs"]:
        try:
            now = _stat(path)
        except OSError:
            return False
        if now == st and settled:
            continue
        if _sha256_file(path) != sha:
            return False
    # Where a new file would hide a header: a folder whose entries changed (its mtime and
    # ctime move when a name is made, removed or renamed in it) has its candidates looked at
    # again (a listing per folder); an unchanged folder cannot have gained or lost one.
    cands = None
    for n, (d, st) in enumerate(meta["shadow"]):
        try:
            if _stat(d) == st:
                continue
        except OSError:
            pass
        if cands is None:  # kept apart (thousands of names for a thrust source), sealed by sha
            raw = fsio.read_or_none(os.path.join(entry or "", "shadow"), MAX_META)
            if raw is None or fsio.sha256(raw).hexdigest() != meta["shadow_sha"]:
                return False
            cands = marshal.loads(raw)
            from nvstage.compiler.cache.presence import Presence

            presence = Presence()  # each folder listed once, not each name asked
        there = presence.of(c for c, _ in cands[n])
        if any(there[c] != was for c, was in cands[n]):
            return False
    for d, real in meta["layout"]:
        if (os.path.realpath(d) if os.path.isdir(d) else None) != real:
            return False
    return True


def restore(meta: dict, root: str, k: str, cwd: str) -> bool:
    """Each output written into place from the entry, checked against its SHA-256; False
    (nothing half-written left behind as the output) when one does not check out."""
    src = _entry_dir(root, k)
    mask = os.umask(0)
    os.umask(mask)
    for n, (rel, sha, executable) in enumerate(meta["outputs"]):
        data = fsio.read_or_none(os.path.join(src, str(n)), MAX_OUTPUT)
        if data is None or fsio.hexdigest(data) != sha:
            return False
        dest = os.path.join(cwd, rel)
        try:
            # Over an existing file in place, as nvcc writes: the folder's entries do not
            # change, so the next hit's look at that folder stays one stat. A new one is made
            # whole under another name first.
            fd = os.open(dest, os.O_WRONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            fd = None
        except OSError:
            return False
        try:
            if fd is not None:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    os.close(fd)
                    return False
                with os.fdopen(fd, "wb") as f:
                    f.truncate(0)
                    f.write(data)
                continue
            tmp = f"{dest}.nvstage-{os.getpid()}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                         (0o777 if executable else 0o666) & ~mask)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, dest)
            except OSError:
                os.unlink(tmp)  # a full disk: no half file left beside the output
                raise
        except OSError:
            return False
    try:
        os.utime(os.path.join(src, "meta"))  # least recently used goes first
    except OSError:
        pass
    return True


def is_launcher_command(first: str) -> bool:
    """``nvstage FIRST ...`` stands in front of a compiler (a path, or a name like nvcc), not
    one of nvstage's commands."""
    base = os.path.basename(first)
    return os.sep in first or base == "nvcc" or base.startswith("nvcc-")


_served: dict = {}  # what the last hit was, for its build-record entry (``log``)


def _answer(nvcc: str, args: list[str], cwd: str, env, root: str, secret: bytes,
            view: bool = False):
    """The entry for ``nvcc args`` when every file it read is unchanged, its outputs restored
    into place; None for a miss. ``view``: only an entry that holds what the CLI prints."""
    k = key(nvcc, args, cwd, env)
    if k is None:
        return None
    meta = load(root, k, secret)
    if meta is None or (view and not isinstance(meta.get("view"), dict)):
        return None
    try:
        if not inputs_unchanged(meta, _entry_dir(root, k)) or not restore(meta, root, k, cwd):
            return None
    except (OSError, ValueError, TypeError, KeyError):
        return None  # a malformed entry behind a good seal: the pipeline answers instead
    meta["dir"] = _entry_dir(root, k)
    _count(root, meta.get("hits", 0))
    return meta


def _count(root: str, hits: int) -> None:
    """The stage hits a whole answer stands for, added to the cache's totals (``nvstage
    cache``; ``Cache.totals`` adds them up)."""
    try:
        fsio.append_line(os.path.join(root, "inv", HITS), b"%d" % int(hits))
    except (ValueError, TypeError):
        pass


def _opened(env) -> tuple[str, bytes] | None:
    if env.get("NVSTAGE_CACHE", "1") == "0":
        return None
    root = cache_root(env)
    secret = _secret(env) if root is not None else None
    return None if secret is None else (root, secret)


def try_hit(argv: list[str], cwd: str, env) -> int | None:
    """``argv`` is ``NVCC ARGS...``: 0 when the whole command was answered from the cache
    (outputs in place, the tools' output printed), None for a miss."""
    import time

    t0, started = time.perf_counter(), time.time()
    nvcc = argv[0] if os.sep in argv[0] else _which(argv[0], env.get("PATH", ""))
    opened = _opened(env) if nvcc is not None else None
    if opened is None:
        return None
    meta = _answer(nvcc, argv[1:], cwd, env, *opened)
    if meta is None:
        return None
    for text, stream in ((meta["stdout"], sys.stdout), (meta["stderr"], sys.stderr)):
        if text:
            stream.flush()
            stream.buffer.write(text.encode("utf-8", "surrogateescape"))
            stream.flush()
    _served.update(dir=meta["dir"], argv=[nvcc, *argv[1:]], cwd=cwd, t0=t0,
                   started=started, env=env, build_sha=meta.get("build_sha"))
    return 0


# -- nvstage compile: the same answer for the CLI's own command line --------------------------
# Its words are not nvcc's (-arch twice builds both, nvstage's options), so its entries live
# under keys of their own: the CLI's words after a marker no nvcc word can be, with the
# variables that choose its nvcc and lay out its tables.
CLI_ENV = ("NVSTAGE_NVCC", "CUDA_HOME", "CUDA_PATH", "CONDA_PREFIX", "COLUMNS")


def cli_args(argv: list[str], env) -> list[str]:
    """The words an ``nvstage compile ARGV`` entry is keyed by (``key``'s ``args``)."""
    from nvstage import __version__

    return [f"\0nvstage compile {__version__}", repr([env.get(k) for k in CLI_ENV]), *argv]


def _choice_key(given: str | None, cwd: str, env) -> str:
    """Which nvcc ``nvstage compile`` finds depends on its ``--nvcc``, the variables
    cuda-pathfinder reads and the packages installed (an install or removal changes the
    site-packages folder): the key of the remembered answer."""
    parts = [SCHEMA, "nvcc choice", sys.executable, given, cwd if given else None,
             [env.get(k) for k in ("PATH", "CONDA_PREFIX", "CUDA_PATH", "CUDA_HOME",
                                   "LD_LIBRARY_PATH")]]
    for p in sys.path:  # where the wheels are found: an install there moves the folder
        try:
            parts.append([p, _stat(p) if p.endswith(("site-packages", "dist-packages"))
                          else None])
        except OSError:
            parts.append([p, None])
    return fsio.sha256(repr(parts).encode("utf-8", "surrogateescape")).hexdigest()


def _choice_file(root: str, given: str | None, cwd: str, env) -> str:
    return os.path.join(root, "inv", "nvcc", _choice_key(given, cwd, env))


def remember_nvcc(given: str | None, cwd: str, env, nvcc: str, source: str) -> None:
    """Note which nvcc (and from where) the toolkit search found, so that a whole-command
    answer needs no search (cuda-pathfinder alone costs 70 ms to import)."""
    opened = _opened(env)
    if opened is None:
        return
    root, secret = opened
    fsio.write_sealed(_choice_file(root, given, cwd, env), secret, [SCHEMA, nvcc, source])


def _remembered_nvcc(root: str, secret: bytes, given: str | None, cwd: str, env):
    try:
        schema, nvcc, source = fsio.read_sealed(_choice_file(root, given, cwd, env), secret,
                                                1 << 16)
    except (ValueError, TypeError):  # None, or not three values
        return None
    if schema != SCHEMA or not os.access(nvcc, os.X_OK):
        return None
    return nvcc, source


def nvcc_named(argv: list[str], env) -> str | None:
    """The ``--nvcc`` an ``nvstage compile`` command line gives, else ``$NVSTAGE_NVCC``
    (``cmdline.nvcc_choice``; here, so the whole-command answer needs no grammar)."""
    found = None
    for i, w in enumerate(argv):
        if w == "--":
            break
        if w == "--nvcc" and i + 1 < len(argv):
            found = argv[i + 1]
        elif w.startswith("--nvcc="):
            found = w.split("=", 1)[1]
    return found or env.get("NVSTAGE_NVCC") or None


def answer_cli(argv: list[str], given: str | None, cwd: str, env) -> dict | None:
    """``nvstage compile ARGV`` answered whole: its outputs restored, and the entry (whose
    ``view`` holds what the command prints) returned; None for a miss. ``given``: its
    ``--nvcc`` or ``$NVSTAGE_NVCC``."""
    opened = _opened(env)
    if opened is None:
        return None
    found = _remembered_nvcc(*opened, given, cwd, env)
    if found is None:
        return None
    return _answer(found[0], cli_args(argv, env), cwd, env, *opened, view=True)


def log(argv: list[str]) -> None:
    """The build-record entry of the hit ``try_hit`` just served (``buildlog``'s format): the
    manifest the command's last staged run made, marked as answered whole from the cache.
    Written as text around the stored manifest, so a hit parses nothing it does not need."""
    import time

    if not _served:
        return
    s = _served
    folder = record_folder(s["cwd"], s["env"])
    from _json import encode_basestring_ascii as q  # the C encoder: the json package is not

    # Only the manifest the sealed entry names (a shared cache's folder is not trusted).
    build = fsio.read_or_none(os.path.join(s["dir"], "build.json"), MAX_META)
    if build is None or fsio.sha256(build).hexdigest() != s.get("build_sha"):
        build = b"null"
    text = (f'{{"schema":"{RECORD_SCHEMA}","argv":[' + ",".join(map(q, s["argv"]))
            + f'],"cwd":{q(s["cwd"])},"started":{s["started"]!r},'
            f'"seconds":{round(time.perf_counter() - s["t0"], 6)!r},"status":"ok",'
            f'"exit_code":0,"pid":{os.getpid()},"reason":null,"hit":true').encode()
    name = f"{int(s['started'] * 1e6):017d}-{os.getpid()}-h.json"
    if not ready_record(folder):
        return
    try:
        fsio.replace(os.path.join(folder, "tu", name), text + b',"build":' + build + b"}")
    except OSError:
        pass  # a build record that cannot be written never fails the build


# The build record's folder (``buildlog`` reads and writes the record; these are here, light,
# for a hit's entry).
RECORD_ENV = "NVSTAGE_BUILD_RECORD"
RECORD_FOLDER = ".nvstage-build"
RECORD_MARK = "NVSTAGE_BUILD_RECORD"
RECORD_SCHEMA = "nvstage.build-record/1"


def record_folder(cwd: str, env) -> str:
    """Where the build record is: ``$NVSTAGE_BUILD_RECORD`` (relative to ``cwd``), else
    ``.nvstage-build`` in ``cwd``."""
    given = env.get(RECORD_ENV, "").strip()
    return os.path.abspath(os.path.join(cwd, given)) if given else \
        os.path.join(cwd, RECORD_FOLDER)


def ready_record(folder: str) -> bool:
    """The record folder, its ``tu/`` and its mark, made if missing; False when they cannot
    be (a build record that cannot be written never fails the build)."""
    try:
        os.makedirs(os.path.join(folder, "tu"), exist_ok=True)
        mark = os.path.join(folder, RECORD_MARK)
        if not os.path.exists(mark):
            with open(mark, "w") as f:
                f.write(f"{RECORD_SCHEMA}: one file per nvcc command under tu/\n")
    except OSError:
        return False
    return True


# -- recording (after a miss, from the launcher or the CLI: the full library may be imported) --

def outputs_of(build, cwd: str, work: str) -> list[str]:
    """The files a build leaves behind (its stages' outputs outside the work folder)."""
    outs = [o for s in build.plan.runnable for o in s.outputs
            if not os.path.abspath(os.path.join(cwd, o)).startswith(work + os.sep)]
    return list(dict.fromkeys(outs))


def record(nvcc: str, args: list[str], cwd: str, env, build, work: str, outputs: list[str],
           stdout: str, stderr: str, started_ns: int, seen=None, build_doc=None) -> bool:
    """Store the entry a later identical command can be answered from, when it is safe
    (``prepare``). False when not stored."""
    pending = prepare(nvcc, args, cwd, env, build, work, outputs, stdout, stderr, started_ns,
                      seen=seen, build_doc=build_doc)
    return pending is not None and pending.store()


# The stages that run the host compiler, and what it may be told that reads or writes a file
# the entry does not hold: a response file (``-Xcompiler @FILE``), profile data, spec files and
# plugins read; coverage notes, stack-usage, dump, split-DWARF and dependency files written.
_HOST_STAGES = frozenset({"host-preprocess", "device-preprocess", "host-compile"})
_UNWATCHED = frozenset({"--coverage", "-ftest-coverage", "-fstack-usage", "-save-temps",
                        "-gsplit-dwarf", "-fcallgraph-info", "-aux-info", "-MD", "-MMD", "-MF",
                        "-fprofile-use", "-fauto-profile", "-specs", "-fplugin", "-B",
                        "-ftime-trace", "-fdump-passes"})
_UNWATCHED_PREFIX = ("-save-temps=", "-fdump-", "-fopt-info", "-fprofile-use=",
                     "-fauto-profile=", "-fprofile-dir=", "-specs=", "-fplugin=",
                     "-fcallgraph-info=", "-fsanitize-ignorelist=", "-fsanitize-blacklist=",
                     "-fprofile-sample-use", "-fprofile-instr-use", "-ftime-trace", "-B")
# Within -Wa, and -Wp, (-Wp,-D_FORTIFY_SOURCE=2 is common and harmless): a listing or a
# dependency file written, a response file read.
_UNWATCHED_PASSED = ("-a", "--MD", "-M", "@")


def unwatched_word(words) -> str | None:
    """The first of a host compiler's ``words`` (its arguments) that reads or writes a file
    neither a whole-command entry nor the stage cache watches or restores; None when none."""
    for a in words:
        if a.startswith("@") or a in _UNWATCHED or a.startswith(_UNWATCHED_PREFIX):
            return a
        if a.startswith(("-Wa,", "-Wp,")) and \
                any(p.startswith(_UNWATCHED_PASSED) for p in a[4:].split(",")):
            return a
    return None


class Pending:
    """An entry read while the build's work folder still exists, written by ``store``
    (the CLI adds what it prints first, ``view``)."""

    def __init__(self, root: str, k: str, meta: dict, blobs: list[bytes], cands: bytes,
                 build_doc, secret: bytes):
        self.root, self.final = root, _entry_dir(root, k)
        self.meta, self.blobs, self.cands = meta, blobs, cands
        self.build_doc, self.secret = build_doc, secret

    def store(self, view: dict | None = None) -> bool:
        if view is not None:
            self.meta["view"] = view
        doc = None
        if self.build_doc is not None:  # kept beside the entry, sealed by its digest
            import json

            doc = json.dumps(self.build_doc, separators=(",", ":")).encode(
                "utf-8", "surrogateescape")
            self.meta["build_sha"] = fsio.sha256(doc).hexdigest()
        body = marshal.dumps(self.meta)
        final = self.final
        tmp = f"{final}.tmp-{os.getpid()}"
        try:
            os.makedirs(tmp, exist_ok=False)
            for n, data in enumerate(self.blobs):
                with open(os.path.join(tmp, str(n)), "wb") as f:
                    f.write(data)
            with open(os.path.join(tmp, "shadow"), "wb") as f:
                f.write(self.cands)
            if doc is not None:
                with open(os.path.join(tmp, "build.json"), "wb") as f:
                    f.write(doc)
            with open(os.path.join(tmp, "meta"), "wb") as f:
                f.write(fsio.seal(self.secret, body))
            if os.path.isdir(final):  # an older entry for the same command: replaced
                import shutil

                shutil.rmtree(final, ignore_errors=True)
            os.rename(tmp, final)
            from nvstage.compiler.cache.store import note_stored

            note_stored(self.root, sum(map(len, self.blobs)) + len(self.cands) + len(body)
                        + len(doc or b""))
        except BaseException as e:  # a full disk, and an interrupted build (Ctrl-C) alike:
            import shutil  # a half-made folder is never an entry, and nothing evicts it

            shutil.rmtree(tmp, ignore_errors=True)
            if not isinstance(e, OSError):
                raise
            return False
        return True


def prepare(nvcc: str, args: list[str], cwd: str, env, build, work: str, outputs: list[str],
            stdout: str, stderr: str, started_ns: int, *, seen=None,
            build_doc=None) -> Pending | None:
    """The entry a later identical command can be answered from, when it is safe: every
    cacheable stage was a hit or was stored (so the stage cache judged nothing uncacheable:
    time macros, .incbin, files changed mid-build), and no file read changed since the
    command started. ``seen`` (the stage cache's ``Seen``): the files each preprocessing
    stage read and their digests, known already; without it they are read from the
    preprocessed outputs' line markers and hashed here. ``build_doc``: the manifest kept
    beside the entry (the launcher's build record). None when nothing may be stored."""
    from nvstage.compiler.cache.headers import builtin_dirs, include_search, \
        shadow_candidates, search_layout
    from nvstage.compiler.cache.presence import Presence
    from nvstage.compiler.cache.seal import secret as make_secret
    from nvstage.compiler.plan import StageKind

    c = build.cache or {}
    if not c or c.get("misses", 0) != c.get("stored", 0) or c.get("corrupt", 0):
        return None
    if any(unwatched_word(r.stage.argv[1:]) for r in build.runs
           if r.stage.kind.value in _HOST_STAGES):
        return None
    # A compilation only: a link searches libraries by name, and a device link reads the
    # toolkit's libraries, none of which the entry watches.
    if any(r.stage.kind.value not in _ANSWERABLE for r in build.runs):
        return None
    root = cache_root(env)
    k = key(nvcc, args, cwd, env)
    if root is None or k is None:
        return None
    try:
        secret = make_secret()
    except Exception:  # no key, no entry: the stage cache said why already
        return None
    files: dict[str, None] = {}
    cands: dict[str, None] = {}
    layout: list = []
    fixed = [build.toolkit.root]
    reads = seen.reads if seen is not None else {}
    for run in build.runs:
        s = run.stage
        if s.kind not in (StageKind.DEVICE_PREPROCESS, StageKind.HOST_PREPROCESS):
            continue
        names = reads.get(s.index)
        if names is None:  # not through the direct mode: the line markers say
            from nvstage.compiler.depfile import marked_files

            data = fsio.read_or_none(os.path.join(cwd, s.outputs[0]), 1 << 31)
            if data is None:
                return None
            names = [os.path.join(cwd, n) for n, _ in marked_files(data)]
        # The outputs of earlier stages (the work folder) are nvstage's own, not inputs.
        names = [n for n in names if not n.startswith(work + os.sep)]
        files.update(dict.fromkeys(names))
        known = seen.shadow.get(s.index) if seen is not None else None
        if known is None:
            builtin = builtin_dirs(s.argv, env)
            search = include_search(s.argv, cwd, env, builtin)
            known = (shadow_candidates(names, search, cwd, [*builtin, *fixed]),
                     search_layout(search))
        cands.update(dict.fromkeys(c for c in known[0] if not c.startswith(work + os.sep)))
        layout += [x for x in known[1] if x not in layout]
    inputs = []
    for path in files:
        try:
            st = _stat(path)
        except OSError:
            return None
        if max(st[1], st[2]) >= started_ns:
            return None  # changed while the command ran: what it read is not known
        sha = (seen.digest(path) if seen is not None else None) or _sha256_file(path)
        if sha is None:
            return None
        settled = max(st[1], st[2]) < started_ns - _SETTLE_NS
        inputs.append([path, st, settled, sha])
    outs = []
    blobs = []
    for rel in outputs:
        p = os.path.join(cwd, rel)
        data = fsio.read_or_none(p, MAX_OUTPUT)
        if data is None:
            return None
        executable = bool(os.stat(p).st_mode & 0o111)
        outs.append([rel, fsio.hexdigest(data), executable])
        blobs.append(data)
    by_dir: dict[str, list[str]] = {}
    nearest: dict[str, str] = {}  # a candidate's folder -> the nearest one that exists
    for cand in sorted(cands):
        parent = os.path.dirname(cand)
        d = nearest.get(parent)
        if d is None:
            d = parent
            while not os.path.isdir(d) and os.path.dirname(d) != d:
                d = os.path.dirname(d)  # a folder to be made is seen in its nearest parent
            nearest[parent] = d
        by_dir.setdefault(d, []).append(cand)
    # The folders as they are now, outputs written (a later change is a new or removed name),
    # and only then what is in them: a name made in between shows in the folder's stat.
    shadow_dirs = []
    for d in by_dir:
        try:
            shadow_dirs.append([d, _stat(d)])
        except OSError:
            return None
    shadow = Presence().of(cands)
    shadow_cands = []
    for names in by_dir.values():
        for cand in names:
            if shadow[cand] and max(_stat(cand)[1:3]) >= started_ns:
                return None  # a hiding file made while the compiler ran: seen or not?
        shadow_cands.append([[cand, shadow[cand]] for cand in names])
    cands_blob = marshal.dumps(shadow_cands)
    meta = {"schema": SCHEMA, "argv": [nvcc, *args], "cwd": cwd, "inputs": inputs,
            "shadow": shadow_dirs, "shadow_sha": fsio.sha256(cands_blob).hexdigest(),
            "layout": layout, "outputs": outs, "stdout": stdout, "stderr": stderr,
            "hits": c.get("hits", 0) + c.get("misses", 0)}
    return Pending(root, k, meta, blobs, cands_blob, build_doc, secret)
