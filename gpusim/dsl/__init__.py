"""The tile DSL: trace Triton-flavoured kernel bodies into the gpusim IR (semantics: Triton's)."""
from . import ir
from .builder import (LOG2E, Tile, TraceError, abs, arange, cast, cdiv, cos, dot, erf, exp, exp2, expand_dims,  # noqa: A004
                      full, gelu, load, log, sigmoid, silu, sin, tanh, log2, loop, maximum, minimum, program_id, rsqrt, sqrt, store, tmax, tmin, trace, trans,
                      tsum, where, zeros)
from .ir import Launch, Program, TensorArg, Workload, emax, emin

__all__ = ["ir", "Tile", "TraceError", "abs", "arange", "cast", "cdiv", "dot", "exp", "exp2", "expand_dims", "full",
           "load", "log", "log2", "loop", "maximum", "minimum", "program_id", "rsqrt", "sqrt", "store", "tmax", "tmin",
           "trace", "trans", "tsum", "where", "zeros", "tanh", "sigmoid", "erf", "sin", "cos", "gelu", "silu", "Launch", "Program", "TensorArg", "Workload", "emax", "emin",
           "LOG2E"]
