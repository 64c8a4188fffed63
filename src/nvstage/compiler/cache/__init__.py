"""The stage cache: storage, keys, and the headers a host-compiler stage read."""
