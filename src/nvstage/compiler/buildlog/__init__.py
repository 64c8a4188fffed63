"""The build log: one entry per command nvstage stood in front of, for a whole build (``log``), and the build a command belongs to (``current``)."""
