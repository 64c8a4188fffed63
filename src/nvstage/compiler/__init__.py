"""From CUDA source to artifacts: the toolkit, nvcc's grammar and plan, the staged driver,
the build record, NVRTC, the stage cache."""
