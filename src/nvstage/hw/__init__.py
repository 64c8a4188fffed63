"""Hardware facts: per-arch SM limits, GPU presets with their sources, occupancy."""
