"""The caches: the stage cache (``stage/``: a stage key, the lookup, the direct mode), its
folder's entries, notes and eviction (``local/``) and the tiers behind it (``remote/``), and
the command cache (``command/``: a whole command answered from one entry)."""
