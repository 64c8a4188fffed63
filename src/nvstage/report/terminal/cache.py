"""``nvstage cache`` on a terminal: the folder, its size, entries and hit rate."""

from __future__ import annotations

from nvstage.report.units import fmt_bytes, fmt_time


def render(info: dict, con) -> None:
    """``Cache.describe()``'s figures, one per line, then each tier's (``info["tiers"]``)."""
    s = info["stats"]
    rate = "-" if s["hit_rate"] is None else f"{s['hit_rate'] * 100:.1f}%"
    for line in (f"folder    {info['dir']}",
                 f"size      {fmt_bytes(info['size'])} of {fmt_bytes(info['max_size'])}",
                 f"entries   {info['entries']}",
                 *_packed(info),
                 f"hit rate  {rate} ({s['hits']} hits, {s['misses']} misses, "
                 f"{s['corrupt']} corrupt, {s['direct_hits']} without preprocessing)"):
        con.print(line, markup=False)
    for line in tier_lines(info.get("tiers")):
        con.print(line, markup=False, soft_wrap=True)


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
        line = (f"tier      {t['tier']}: {t['hits']} hits, {t['misses']} misses, "
                f"{fmt_bytes(t['bytes_read'])} read, {fmt_bytes(t['bytes_written'])} written, "
                f"{fmt_time(t['seconds'], 's')}, {t['errors']} errors")
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
