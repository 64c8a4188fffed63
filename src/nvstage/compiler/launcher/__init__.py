"""nvstage in front of a build's tools, as ccache is: the launcher's flow (``flow``), steps
that are not nvcc (``tool_step``) and the resident nvstage (``resident/``)."""
