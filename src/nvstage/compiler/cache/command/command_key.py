"""A whole nvcc command's key: what decides its outputs, hashed without reading a source.

The nvcc named and the toolkit's tools (by path, size, mtime, ctime and inode), the host
compiler nvcc would find, the current folder (and ``$PWD`` where gcc names it so: ``gcc_pwd``),
the words of the command (options files by content), and the environment nvcc and gcc read
(``ENV``, and the variables nvcc's profile and binary name: ``nvcc_env``). What the source
and its headers hold is the entry's to check (``answer.inputs_unchanged``). Standard library
only: the hit path's first step.
"""

from __future__ import annotations

import os

from nvstage import fsio
from nvstage.compiler.nvcc import environment as nvcc_env
from nvstage.compiler.store.layout import SCHEMA
from nvstage.compiler.toolkit.nvcc_lookup import is_elf, which

# The environment nvcc, its tools and gcc read (gcc's include and locale variables; nvcc's own
# flags): any change is another key. The variables nvcc's profile and binary name (INCLUDES,
# PTXAS_FLAGS, OCG_FLAGS, ...) are keyed too, taken from the toolkit in use (``nvcc_env``).
ENV = ("PATH", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN", "CPATH",
       "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "GCC_EXEC_PREFIX", "COMPILER_PATH",
       "LIBRARY_PATH", "SOURCE_DATE_EPOCH", "LANG", "LC_ALL", "LC_MESSAGES", "LC_CTYPE",
       "NVSTAGE_CACHE", "NVSTAGE_BASE_DIR")
# Read by the tools nvcc runs, not by nvcc (seen with a getenv logger: a Debian gcc's
# ``*_ROOT`` folders, ptxas's and cicc's switches), none of them in nvcc's profile or bytes:
# FINALIZER_USE_LEGACY_ELF_BUILDER changes the cubin, GCC_ROOT whether gcc finds its headers.
TOOL_ENV = ("BINUTILS_ROOT", "GCC_ROOT", "G++_ROOT", "GCC_COMPARE_DEBUG",
            "GCC_EXTRA_DIAGNOSTIC_OUTPUT", "FINALIZER_USE_LEGACY_ELF_BUILDER", "FINALIZER_CUBIE",
            "CAN_FINALIZE_DEBUG", "NVVM_IR_VER_CHK", "LLVM_OVERRIDE_PRODUCER", "USR_INCLUDE",
            "EDG_BASE", "EDG_SUPPRESS_ASSERTION_LINE_NUMBER", "LIBNVVM_DISABLE_CONCURRENT_API",
            "NOCOLOR")
# The toolkit, relative to the folder above nvcc's bin/: what nvcc runs and reads itself.
TOOLS = ("bin/nvcc", "bin/nvcc.profile", "bin/cudafe++", "bin/ptxas", "bin/fatbinary",
         "bin/nvlink", "nvvm/bin/cicc", "nvvm/libdevice/libdevice.10.bc")
_OPTF = ("--options-file", "-optf")
# Words in $NVCC_PREPEND_FLAGS/$NVCC_APPEND_FLAGS that name a file the key must read: only
# then are they split (shlex costs a hit the re module).
_ENV_FILE_WORDS = ("optf", "options-file", "ccbin", "compiler-bindir")
# gcc writes its dependency file as a side effect where these name one: no entry restores it.
SIDE_ENV = ("DEPENDENCIES_OUTPUT", "SUNPRO_DEPENDENCIES")


def side_env(env) -> str | None:
    """The variable in ``env`` that has gcc write a dependency file of its own, if any: a
    command under it has no key, and the stage cache runs its host stages."""
    return next((v for v in SIDE_ENV if env.get(v)), None)


def file_stat(path: str) -> list[int]:
    """What a file's identity is taken to be: size, mtime, ctime, inode (raises OSError)."""
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _stat_or_none(path: str) -> list[int] | None:
    """``file_stat``, None where ``os.path.exists`` would say False: one stat, not two (a
    hit keys a dozen such files)."""
    try:
        return file_stat(path)
    except (OSError, ValueError):
        return None


def gcc_pwd(cwd: str, env) -> str:
    """The current folder as gcc names it in ``-g``'s debug information (libiberty's
    ``getpwd``): ``$PWD`` where it is absolute and is this folder (through a link, say), else
    ``cwd``. The same folder reached through a link builds another object."""
    pwd = env.get("PWD")
    if not pwd or pwd == cwd or not pwd.startswith("/"):
        return cwd
    try:
        a, b = os.stat(pwd), os.stat(cwd)
    except (OSError, ValueError):
        return cwd
    return pwd if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino) else cwd


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
            out.append(which("gcc", ccbin) or which("g++", ccbin) or ccbin)
        else:
            out.append(ccbin if os.sep in ccbin else which(ccbin, env.get("PATH", "")))
    return out or [which("gcc", env.get("PATH", ""))]


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
    (nvcc is a wrapper script, a tool is missing, an options file that names another or is no
    small regular file) or when what it writes is more than the entry holds (gcc's
    $DEPENDENCIES_OUTPUT). The plan memo is keyed with it (``plan_memo.key``)."""
    parts = components(nvcc, args, cwd, env)
    return None if isinstance(parts, str) else digest(parts)


def digest(parts: list) -> str:
    """The key of ``components``' parts."""
    h = fsio.sha256(SCHEMA.encode())
    # repr of lists of str, int and None: one spelling per value, as JSON would give.
    h.update(repr(parts).encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def components(nvcc: str, args: list[str], cwd: str, env) -> list | str:
    """What ``key`` is a digest of, in order: nvcc's real path, the folder (and gcc's $PWD),
    the words, the keyed environment (``ENV``, ``TOOL_ENV`` and nvcc's own names, each as
    [name, value]), the toolkit's tools' stats, the options files' digests and the host
    compilers' stats (``compiler/cache/command/explain.py`` names the first that differs). A str where the
    command has no key: why."""
    var = side_env(env)
    if var is not None:
        return f"${var} has gcc write a dependency file of its own"
    # The words nvcc reads, for the files they name: the environment's flags around the
    # command's (their text is keyed with the environment; the files they name, here).
    words = [*_env_words(env, "NVCC_PREPEND_FLAGS"), *args,
             *_env_words(env, "NVCC_APPEND_FLAGS")]
    try:
        real = os.path.realpath(nvcc)
        if not is_elf(real):  # a wrapper script: what it reads (its variables, files) is unknown
            return f"{nvcc} is a script, not the toolkit's nvcc: what it reads is unknown"
        root = os.path.dirname(os.path.dirname(real))
        pwd = gcc_pwd(cwd, env)
        parts = [real, cwd if pwd == cwd else [cwd, pwd], args, [[k, env.get(k)] for k in ENV],
                 [[k, env[k]] for k in TOOL_ENV if k in env],
                 [[k, env[k]] for k in nvcc_env.env_names(real, env) if k in env]]
        parts.append([[t, st] for t in TOOLS
                      if (st := _stat_or_none(os.path.join(root, t))) is not None])
        if env.get("NVSTAGE_TIME_TRACE") == "1":  # traced cicc can write other code
            parts.append("traced")
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
                        # one level is keyed by content; deeper is the miss path's
                        return f"the options file {n} names another, or is no small file"
                    files.append([n, fsio.hexdigest(data)])
                    if b"ccbin" in data or b"compiler-bindir" in data:
                        opt_words += data.decode("utf-8", "surrogateescape").split()
        parts.append(files)
        parts.append([[c, _stat_or_none(c) if c else None]
                      for c in _host_compilers([*words, *opt_words], env)])
    except (OSError, ValueError) as e:
        return f"a file the key reads cannot be read: {getattr(e, 'strerror', None) or e}"
    return parts
