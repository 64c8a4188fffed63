"""``nvstage cache`` on a terminal: the folder, its size, entries and hit rate."""

from __future__ import annotations

from nvstage.report.units import fmt_bytes, fmt_time, plural


def render(info: dict, con) -> None:
    """``Cache.describe()``'s figures, one per line, then each tier's (``info["tiers"]``) and
    the resident server's (``info["servers"]``)."""
    s = info["stats"]
    rate = "-" if s["hit_rate"] is None else f"{s['hit_rate'] * 100:.1f}%"
    since = f", since {_when(s['zeroed'])}" if s.get("zeroed") is not None else ""
    for line in (f"folder    {info['dir']}",
                 f"size      {fmt_bytes(info['size'])} of {fmt_bytes(info['max_size'])}",
                 f"entries   {info['entries']}",
                 *_packed(info),
                 f"hit rate  {rate} ({plural(s['hits'], 'hit')}, {plural(s['misses'], 'miss', 'misses')}, "
                 f"{s['corrupt']} corrupt, {s['direct_hits']} without preprocessing{since})"):
        con.print(line, markup=False)
    for line in [*tier_lines(info.get("tiers")), *server_lines(info.get("servers"))]:
        con.print(line, markup=False, soft_wrap=True)


def _when(t: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def server_lines(servers: list[dict] | None) -> list[str]:
    """The resident nvstage serving the folder: one line each, or one saying none runs."""
    if servers is None:
        return []
    if not servers:
        return ["server    none running (the launcher starts one)"]
    out = []
    for s in servers:
        idle = "-" if s["idle_s"] is None else fmt_time(s["idle_s"], "s", digits=0)
        line = f"server    pid {s['pid']}, running since {_when(s['since'])}, " \
               f"leaves after {idle} idle"
        if not s.get("current"):
            line += " (an nvstage since changed or upgraded: it leaves when idle)"
        out.append(line)
    return out


def stopped_lines(doc: dict) -> list[str]:
    """``nvstage cache --stop-server``'s one line."""
    if not doc["stopped"]:
        return [f"no resident nvstage runs for {doc['dir']}"]
    return [f"stopped the resident nvstage for {doc['dir']} "
            f"(pid {', '.join(map(str, doc['stopped']))})"]


def zeroed(root, done: bool) -> str:
    return f"zeroed the counters of {root}" if done else f"no cache at {root}: nothing to zero"


def explain_lines(doc: dict) -> list[str]:
    """``explain.explain``'s answer: a headline, then one line per command that missed or
    fell back: its output, what happened, and why (the first difference)."""
    if doc["build"] is None:
        return [f"no nvcc command in the build record {doc['record']}"]
    head = (f"build {doc['build']} in {doc['record']}: {doc['commands']} nvcc "
            f"command{'s' if doc['commands'] != 1 else ''}, {doc['hits']} answered whole, "
            f"{doc['missed']} missed, {doc['fell_back']} fell back"
            + (f", {doc['failed']} failed" if doc["failed"] else ""))
    out = [head]
    for u in doc["units"]:
        state = {"miss": "missed", "fallback": "fell back", "failed": "failed"}[u["status"]]
        more = len(u["differences"])
        tail = f" (and {more} more difference{'s' if more != 1 else ''})" if more else ""
        out.append(f"{u['name']}: {state}: {u['why']['text']}{tail}")
    if not doc["units"] and doc["commands"]:
        out.append("every command was answered whole from the cache")
    return out


def _packed(info: dict) -> list[str]:
    """The stage entries' files as stored, against their size uncompressed."""
    stored, plain = info.get("stored_bytes"), info.get("uncompressed_bytes")
    if not plain:
        return []
    return [f"stored    {fmt_bytes(stored)} of files, {fmt_bytes(plain)} uncompressed "
            f"(zstd: {stored / plain:.2f} of it)"]


def cleared(root, done: bool) -> str:
    return f"cleared {root}" if done else f"no cache to clear at {root}"


def tier_lines(tiers: list[dict] | None) -> list[str]:
    """One line per tier (and one per setting that cannot be used)."""
    out = []
    for t in tiers or []:
        if t["tier"] is None:
            out += [f"problem   {p}" for p in t["problems"]]
            continue
        line = (f"tier      {t['tier']}: {plural(t['hits'], 'hit')}, "
                f"{plural(t['misses'], 'miss', 'misses')}, "
                f"{fmt_bytes(t['bytes_read'])} read, {fmt_bytes(t['bytes_written'])} written, "
                f"{fmt_time(t['seconds'], 's')}, {plural(t['errors'], 'error')}")
        if t["tier"] != "local":
            line += f", {t['rejected']} rejected"
        notes = [t[k] for k in ("signing", "read_only") if t.get(k)]
        if t.get("down"):
            notes.append(f"down: {t['down']}")
        if t.get("configured") is False:
            notes.append("not configured now")
        if t.get("base_dir"):
            notes.append(f"base folder {t['base_dir']}")
        if t.get("base_dir_problem"):
            notes.append(t["base_dir_problem"])
        out.append(line + (f" ({'; '.join(notes)})" if notes else ""))
    return out
