"""The stage cache: ``store`` (storage), ``keys`` (what a key hashes), ``headers`` (where a new
file would hide a header), ``stage`` (one build's stages through the cache, the direct mode)."""
