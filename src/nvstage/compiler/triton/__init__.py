"""Triton's pipeline stage by stage (``stages``), its command line (``triton_cmdline``) and a kernel read from its file without running it (``triton_source``)."""
