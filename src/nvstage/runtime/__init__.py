"""Everything that needs a CUDA driver. Import lazily, and probe first (``driver.probe``)."""
