"""The tile DSL: trace Triton-flavoured kernel bodies into the gpusim IR (semantics: Triton's)."""
from . import ir
from .builder import (LOG2E, Tile, TraceError, abs, arange, cast, cdiv, dot, exp, exp2, expand_dims, full, load,  # noqa: A004
                      log, log2, loop, maximum, minimum, program_id, rsqrt, sqrt, store, tmax, tmin, trace, trans,
                      tsum, where, zeros)
from .ir import Launch, Program, TensorArg, Workload, emax, emin

__all__ = ["ir", "Tile", "TraceError", "abs", "arange", "cast", "cdiv", "dot", "exp", "exp2", "expand_dims", "full",
           "load", "log", "log2", "loop", "maximum", "minimum", "program_id", "rsqrt", "sqrt", "store", "tmax", "tmin",
           "trace", "trans", "tsum", "where", "zeros", "Launch", "Program", "TensorArg", "Workload", "emax", "emin",
           "LOG2E"]
