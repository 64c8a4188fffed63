"""One stage through the farm, or not: the part of ``driver.run_stage`` that distribution adds.

Faults never fail a build plain nvcc passes: a client that cannot start, a run past
``NVSTAGE_DIST_TIMEOUT`` or a failing exit give one line on stderr and a plain local run,
whose result stands (a real compile error then fails as plain nvcc's does); sccache 0.16 fails
that way on a wrong token. A farm it cannot use (scheduler or build server down, a toolchain
upload that fails) makes sccache compile locally itself: one line too, and that result stands.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from nvstage.compiler.dist.farm_backend import Attempt, Backend
from nvstage.compiler.dist.choice import (CLIENT_ENV, ENV, TIMEOUT_ENV, backend_from_env,
                                          notice, timeout_from_env)
from nvstage.compiler.dist.rewrite import DISTRIBUTED, rewrite
from nvstage.compiler.manifest.where import Where
from nvstage.compiler.nvcc.plan import Stage
from nvstage.errors import ToolMissing, ToolTimeout

_lock = threading.Lock()
_backends: dict[tuple[str, str, str], Backend | None] = {}


def _backend(env: Mapping[str, str]) -> Backend | None:
    """One backend per setting a process (its unusable settings said once)."""
    key = (env.get(ENV, ""), env.get(CLIENT_ENV, ""), env.get("PATH", ""))
    with _lock:
        if key not in _backends:
            _backends[key] = backend_from_env(env)
        return _backends[key]


def run_distributed(stage: Stage, env: Mapping[str, str], cwd: str,
                    extra_args: tuple[str, ...] = ()) -> tuple[Attempt | None, Where | None]:
    """(what the farm's run gave, None), or (None, where): run the stage here, and record
    ``where`` (None: not distributed; ``Where.FALLBACK``: the farm's run failed, said)."""
    if stage.kind not in DISTRIBUTED or extra_args or not env.get(ENV):
        return None, None
    backend = _backend(env)
    if backend is None:
        return None, None
    rw = rewrite(stage, cwd)
    if rw is None:
        return None, None
    timeout = timeout_from_env(env)
    try:
        attempt = backend.run(rw.argv, rw.cwd, env, timeout)
    except ToolTimeout:
        notice(f"{stage.tool} ran past {timeout:g} s through {backend.name} "
               f"({TIMEOUT_ENV}): running it here", once="timeout")
        return None, Where.FALLBACK
    except ToolMissing as e:
        notice(f"{backend.name} could not run {stage.tool}: {e}; running it here",
               once="missing")
        return None, Where.FALLBACK
    if attempt.returncode != 0:
        first = next((ln.strip() for ln in attempt.stderr.splitlines() if ln.strip()), "")
        notice(f"{stage.tool} through {backend.name} exited {attempt.returncode}"
               f"{' (' + first[:200] + ')' if first else ''}: running it here", once="exit")
        return None, Where.FALLBACK
    if attempt.where is Where.LOCAL and attempt.why:
        notice(f"{backend.name} compiled {stage.tool} on this machine: {attempt.why}",
               once="local")
    return attempt, None


def remote_lane(env: Mapping[str, str], cwd: str) -> Callable[[Stage], bool] | None:
    """For the scheduler: which stages go to the farm (they take no local job slot); None
    when distribution is off."""
    if not env.get(ENV) or _backend(env) is None:
        return None
    return lambda s: s.kind in DISTRIBUTED and rewrite(s, cwd) is not None
