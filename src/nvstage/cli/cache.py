"""nvstage cache: where the stage cache lives, how big it is, how often it helps, and each tier
behind it (the local folder, remote servers); clear it; make a key pair for signed entries."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from nvstage.cli.common import emit_json, handled
from nvstage.cli.options import json_option
from nvstage.errors import UsageError
from nvstage.report.terminal.console import data_console, say


def cache_cmd(
    unit: Annotated[Optional[str], typer.Argument(metavar="UNIT",
        help="With --explain: only the command whose object or source this names (its path, "
             "or the end of it).", show_default=False)] = None,
    explain: Annotated[Optional[Path], typer.Option("--explain", metavar="BUILD",
        help="Why each command of the last build in BUILD (a build folder, or its "
             ".nvstage-build) missed or fell back: the first part of its key that differs from "
             "the earlier build of the same output (a word, a variable, a header, the "
             "toolkit), or the fallback's reason.")] = None,
    zero_stats: Annotated[bool, typer.Option("--zero-stats",
        help="Zero the counters (hits, misses, each tier's figures); the entries stay.")
    ] = False,
    stop_server: Annotated[bool, typer.Option("--stop-server",
        help="Stop the resident nvstage serving this cache folder, if one runs (the next "
             "launcher command starts another; NVSTAGE_SERVER=0 refuses it).")] = False,
    clear: Annotated[bool, typer.Option("--clear",
        help="Remove every entry and reset the counters (only in a folder nvstage made; "
             "running builds keep their scratch folders). A remote tier is not touched.")
    ] = False,
    cache_dir: Annotated[Optional[str], typer.Option("--dir",
        help="This cache folder instead of $NVSTAGE_CACHE_DIR or ~/.cache/nvstage.")] = None,
    new_key: Annotated[Optional[Path], typer.Option("--new-signing-key",
        help="Write a new Ed25519 private key to this file (0600) for signing remote "
             "entries, and print its public key.")] = None,
    json_out: json_option("Print the figures as JSON.") = False,
) -> None:
    """Show the stage cache: its folder, size, entries and hit rate over all builds (since
    --zero-stats), each tier (hits, misses, bytes moved, time spent, errors), and the resident
    nvstage serving it, if one runs (its pid, since when, its idle timeout).

    nvstage compile reuses a stage's earlier outputs when its tool, arguments, environment
    and input files (headers included) are unchanged; --no-cache there turns it off.
    Entries past the size limit ($NVSTAGE_CACHE_MAX_SIZE, default 2 GiB) are evicted least
    recently used first. nvstage marks the folders it makes with a CACHEDIR.TAG and clears or
    evicts from no other: a folder of yours is refused, whatever its files are called.

    Remote tiers come from the environment only: NVSTAGE_REMOTE_CACHE (redis://HOST:PORT/DB,
    http(s)://HOST/PATH with |layout=subdirs, flat or bazel), credentials in
    NVSTAGE_REMOTE_USER, NVSTAGE_REMOTE_PASSWORD or NVSTAGE_REMOTE_TOKEN, signatures with
    NVSTAGE_REMOTE_SIGNING_KEY (writers) and NVSTAGE_REMOTE_VERIFY_KEY (readers),
    NVSTAGE_REMOTE_READ_ONLY=1 for jobs that must not write. NVSTAGE_BASE_DIR makes paths
    under it relative, so checkouts at other paths share entries.

    Examples:

          nvstage cache

          nvstage cache --json

          nvstage cache --clear

          nvstage cache --explain build

          nvstage cache --stop-server

          nvstage cache --new-signing-key ci-signing.pem
    """
    from nvstage.compiler.cache.local import Cache
    from nvstage.report.terminal import cache as shown

    with handled(json_out):
        if new_key is not None:
            return _new_key(new_key, json_out)
        if unit is not None and explain is None:
            raise UsageError(f"{unit!r}: a unit is given with --explain BUILD only",
                             hint=f"nvstage cache --explain BUILD {unit}")
        if explain is not None:
            from nvstage.compiler.cache.command.explain import explain as why

            return _out(why(explain, unit, cache_dir), json_out, shown.explain_lines)
        cache = Cache(cache_dir)
        if cache_dir is not None:
            cache.label = f"--dir {cache_dir}"
        from nvstage.compiler.launcher.resident.server import running, stop

        if stop_server:
            pids = stop(str(cache.root), dict(os.environ))
            return _out({"dir": str(cache.root), "stopped": pids}, json_out, shown.stopped_lines)
        # A file, or a folder nvstage did not make and mark, is refused with one line: its
        # entries/, notes/ or tmp/ are somebody else's, and it is no "empty cache" either.
        if clear:
            say(shown.cleared(cache.root, cache.clear()))
        if zero_stats:
            say(shown.zeroed(cache.root, cache.zero_stats()))
        info = cache.describe()
        info["servers"] = [{k: v for k, v in s.items() if k != "lock"}
                           for s in running(str(cache.root), dict(os.environ))]
        from nvstage.compiler.cache.remote.describe import describe

        tiers = describe(cache)
        if tiers is not None:
            info["tiers"] = tiers
        if json_out:
            emit_json(info)
            return
        shown.render(info, data_console(False))


def _out(doc: dict, json_out: bool, lines) -> None:
    """``doc`` as JSON, or as the lines ``lines(doc)`` gives."""
    if json_out:
        return emit_json(doc)
    for line in lines(doc):
        data_console(False).print(line, markup=False, soft_wrap=True)


def _new_key(path: Path, json_out: bool) -> None:
    from nvstage.compiler.cache.remote.signing import new_key_pair

    pem, public = new_key_pair()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        raise UsageError(f"{path} exists: nvstage does not replace a key",
                         hint="give a new file's name") from None
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    if json_out:
        emit_json({"private_key": str(path), "public_key": public})
        return
    say(f"wrote the private key {path}: give it to trusted writers as "
        f"NVSTAGE_REMOTE_SIGNING_KEY (a CI secret)")
    data_console(False).print(public, markup=False, soft_wrap=True)
