"""From CUDA source to artifacts: what nvcc is, the toolkit, the pipeline that runs
nvcc's plan stage by stage, the caches, the manifest and the build log, the launcher, Triton
and NVRTC. docs/architecture.md draws it."""
