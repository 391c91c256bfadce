"""Triton backend: ``lower`` (IR -> Triton source) and ``run`` (import, run and time on a GPU or the
Triton interpreter). Importing this package does not import triton or torch."""
