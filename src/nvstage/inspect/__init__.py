"""Pure readers of what the toolchain produced: PTX, SASS, resources, fatbins, cubin ELF."""
