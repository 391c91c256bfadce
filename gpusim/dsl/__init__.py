"""The tile DSL: trace Triton-flavoured kernel bodies into the gpusim IR."""
from . import ir
from .builder import (LOG2E, Tile, TraceError, arange, cast, cdiv, dot, exp, exp2, expand_dims, full, load, log, loop,
                      maximum, minimum, program_id, sqrt, store, tmax, trace, trans, tsum, where, zeros)
from .ir import Launch, Program, TensorArg, Workload, emax, emin

__all__ = ["ir", "Tile", "TraceError", "arange", "cast", "cdiv", "dot", "exp", "exp2", "expand_dims", "full", "load",
           "log", "loop", "maximum", "minimum", "program_id", "sqrt", "store", "tmax", "trace", "trans", "tsum", "where",
           "zeros", "Launch", "Program", "TensorArg", "Workload", "emax", "emin", "LOG2E"]
