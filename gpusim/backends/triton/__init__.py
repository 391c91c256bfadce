"""Triton backend: ``run`` imports the source that ``gpusim.toolchain.lower`` generates, runs whole
workloads on a GPU or the Triton interpreter and times them. Importing this package does not import
triton or torch."""
