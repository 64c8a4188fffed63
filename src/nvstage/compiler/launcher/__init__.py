"""nvstage in front of a build's tools, as ccache is: the front door (``front``), the launcher flow (``flow``), steps that are not nvcc (``tool_step``) and the resident nvstage (``resident/``)."""
