"""The stage cache: ``store`` (the local folder), ``keys`` (what a key hashes, the base folder),
``headers`` (where a new file would hide a header), ``stage`` (one build's stages through the
cache, the direct mode), ``tiers`` (remote tiers behind the local folder: what they hold, trust
and faults), ``remote`` (Redis and HTTP servers), ``signing`` (Ed25519 signatures)."""
