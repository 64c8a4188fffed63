"""The stage cache: ``keys`` (what a key hashes, the base folder), ``headers`` (where a new file
would hide a header), ``stage`` (one build's stages through the cache, the direct mode),
``local/`` (the folder: entries, notes, eviction, relocation, its key) and ``remote/`` (the
tiers behind it: one file per backend behind one interface, objects, signatures)."""
