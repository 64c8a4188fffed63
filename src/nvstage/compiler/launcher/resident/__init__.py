"""The resident nvstage: the server that forks one child per command (``server``), the thin client that asks it for a hit first (``ask``) and the hand-over of a miss (``handover``)."""
