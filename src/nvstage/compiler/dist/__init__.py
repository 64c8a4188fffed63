"""Distributed stages: cicc and ptxas run on a build farm (sccache-dist, through the user's
``sccache`` client) when the environment asks for it (``NVSTAGE_DIST=sccache``).

Opt-in, and only on a stage-cache miss (the driver's ``run_stage``). The command is rewritten
only in ways proven output-neutral (``rewrite.py``); whatever goes wrong on the farm's side
gives one line on stderr and a local run (``farm_stage.py``). The manifest says where each
stage ran (``manifest/where.py``). The driver calls the two functions here on every build: with
``NVSTAGE_DIST`` unset they answer without importing the rest.
"""

from __future__ import annotations

ENV = "NVSTAGE_DIST"  # choice.ENV, spelt here so that the check imports nothing


def run_distributed(stage, env, cwd: str, extra_args: tuple[str, ...] = ()):
    """``stage.run_distributed``: (None, None) at once when distribution is off."""
    if not env.get(ENV):
        return None, None
    from nvstage.compiler.dist.farm_stage import run_distributed as run

    return run(stage, env, cwd, extra_args)


def remote_lane(env, cwd: str):
    """``stage.remote_lane``: None at once when distribution is off."""
    if not env.get(ENV):
        return None
    from nvstage.compiler.dist.farm_stage import remote_lane as lane

    return lane(env, cwd)


__all__ = ["ENV", "remote_lane", "run_distributed"]
