"""The resident nvstage: the server (``server``) and the child it forks per command
(``child``), the thin client that asks it for a hit first (``ask``), the hand-over of a miss
(``handover``) and its start (``start``)."""
