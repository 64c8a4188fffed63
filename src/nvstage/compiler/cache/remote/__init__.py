"""The stage cache's remote tiers: where they are (``spec``, ``config``), the one interface a
backend speaks (``protocol``) with one deadline for every operation (``deadline``), the
backends themselves, one file each (``redis``, ``http``; ``bazel`` encodes the HTTP tier's
bazel layout), what an object holds (``objects``) and how it is signed (``signing``), one tier
(``tier``), one build's tiers behind its local folder (``tiers``), and what ``nvstage cache``
says of them (``describe``). Nothing here is imported unless ``NVSTAGE_REMOTE_CACHE`` is set,
but ``tiers``, ``tier`` and ``objects`` (no socket).
"""
