"""From CUDA source to artifacts: the toolkit, nvcc's grammar and plan, the staged driver, NVRTC, the stage cache."""
