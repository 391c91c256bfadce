"""The Triton toolchain, below the compiler's view: ``lower`` (IR -> Triton source), ``compile``
(triton.compile for sm_90 without a GPU: registers, spills, SASS mix), ``sass_deps`` (the SASS
loop's register dependencies), ``cache`` (the checked directory generated sources and compiled
resources live in). Importing this package does not import triton or torch."""
