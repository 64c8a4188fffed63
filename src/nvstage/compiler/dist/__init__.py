"""Distributed stages: cicc and ptxas run on a build farm (sccache-dist, through the user's
``sccache`` client) when the environment asks for it (``NVSTAGE_DIST=sccache``).

Opt-in, and only on a stage-cache miss (the driver's ``run_stage``). The command is rewritten
only in ways proven output-neutral (``rewrite.py``); whatever goes wrong on the farm's side
gives one line on stderr and a local run (``stage.py``). The build record says where each
stage ran (``where.py``). Standard library only: the driver imports this on every build.
"""

from nvstage.compiler.dist.choice import backend_from_env
from nvstage.compiler.dist.stage import remote_lane, run_distributed
from nvstage.compiler.dist.where import Where

__all__ = ["backend_from_env", "remote_lane", "run_distributed", "Where"]
