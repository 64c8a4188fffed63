"""The tiers behind a local cache folder, for ``nvstage cache``."""

from __future__ import annotations

import os
import time

from nvstage.compiler.cache.local import Cache
from nvstage.compiler.cache.local.notes import TierStats, recorded_stats
from nvstage.compiler.cache.remote import named
from nvstage.compiler.cache.remote.config import configure
from nvstage.compiler.cache.remote.tiers import down_now
from nvstage.paths import base_dir, base_dir_problem

def describe(cache: Cache, environ=None) -> list[dict] | None:
    """The tiers behind ``cache`` for ``nvstage cache``: the local folder, then each remote
    tier configured now or recorded before, with the figures over every build that used this
    folder, how each is configured, and the settings that cannot be used. None when no remote
    tier is configured or recorded (the output then reads as it did before tiers)."""
    environ = os.environ if environ is None else environ
    doc = cache.tier_doc() if cache.state() == "ours" else {}
    stats = doc.get("stats") if isinstance(doc.get("stats"), dict) else {}
    down = doc.get("down") if isinstance(doc.get("down"), dict) else {}
    config = None
    problems: list[str] = []
    value = named(environ)
    if value:
        config = configure(value, environ)
        problems = config.problems
    labels = [t.label for t in config.tiers] if config else []
    recorded = [k for k in stats if k != "local" and k not in labels]
    if not labels and not recorded and not problems:
        return None
    out = []
    for label in ["local", *labels, *recorded]:
        row = {"tier": label, **TierStats().to_json()}
        old = stats.get(label)
        if isinstance(old, dict):
            total, row["builds"] = recorded_stats(old)
            row.update(total.to_json())
        if label == "local":
            row["dir"] = str(cache.root)
            base, why = base_dir(), base_dir_problem()
            if base:
                row["base_dir"] = base
            elif why:
                row["base_dir_problem"] = why
        elif label in labels:
            tier = config.tiers[labels.index(label)]
            row["configured"] = True
            row["signing"] = config.signing
            if tier.why_read_only:
                row["read_only"] = tier.why_read_only
            if down_now(down.get(label), time.time()):
                row["down"] = str(down[label].get("why"))
        else:
            row["configured"] = False
        out.append(row)
    if problems:
        out.append({"tier": None, "problems": problems})
    return out
