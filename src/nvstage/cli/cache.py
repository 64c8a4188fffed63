"""nvstage cache: where the stage cache lives, how big it is, how often it helps; clear it."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from nvstage.cli.common import data_console, emit_json, handled, stderr


def cache_cmd(
    clear: Annotated[bool, typer.Option("--clear",
        help="Remove every entry and reset the counters (only in a folder nvstage made; "
             "running builds keep their scratch folders).")] = False,
    cache_dir: Annotated[Optional[str], typer.Option("--dir",
        help="This cache folder instead of $NVSTAGE_CACHE_DIR or ~/.cache/nvstage.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
) -> None:
    """Show the stage cache: its folder, size, entries and hit rate over all builds.

    nvstage compile reuses a stage's earlier outputs when its tool, arguments, environment
    and input files (headers included) are unchanged; --no-cache there turns it off.
    Entries past the size limit ($NVSTAGE_CACHE_MAX_SIZE, default 2 GiB) are evicted least
    recently used first. nvstage marks the folders it makes with a CACHEDIR.TAG and clears or
    evicts from no other: a folder of yours is refused, whatever its files are called.

    Examples:

          nvstage cache

          nvstage cache --json

          nvstage cache --clear
    """
    from nvstage.compiler.cache.store import Cache
    from nvstage.report.units import fmt_bytes

    with handled(json_out):
        cache = Cache(cache_dir)
        if cache_dir is not None:
            cache.label = f"--dir {cache_dir}"
        # A file, or a folder nvstage did not make and mark, is refused with one line: its
        # entries/, notes/ or tmp/ are somebody else's, and it is no "empty cache" either.
        if clear:
            done = cache.clear()
            stderr().print(f"cleared {cache.root}" if done else f"no cache to clear at "
                           f"{cache.root}", markup=False)
        info = cache.describe()
        if json_out:
            emit_json(info)
            return
        s = info["stats"]
        rate = "-" if s["hit_rate"] is None else f"{s['hit_rate'] * 100:.1f}%"
        con = data_console(False)
        con.print(f"folder    {info['dir']}", markup=False)
        con.print(f"size      {fmt_bytes(info['size'])} of {fmt_bytes(info['max_size'])}",
                  markup=False)
        con.print(f"entries   {info['entries']}", markup=False)
        con.print(f"hit rate  {rate} ({s['hits']} hits, {s['misses']} misses, "
                  f"{s['corrupt']} corrupt, {s['direct_hits']} without preprocessing)",
                  markup=False)
