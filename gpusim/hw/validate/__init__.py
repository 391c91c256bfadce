"""Validation against a real GPU: measure every point of a scenario, predict it, compare.

Modules, data flowing down:

* ``measure``  correctness check against float64 and timing through the Triton backend (GPU)
* ``user_kernels`` a user's unmodified ``@triton.jit`` kernel run as traced, checked against its IR on numpy
* ``predict``  the simulator's prediction of each point, in worker processes (CPU)
* ``ncu``      DRAM counters from Nsight Compute, one ncu process per batch of points
* ``rows``     records -> ``validation.csv`` rows; loading a saved ``validation.json``
* ``analysis`` error statistics, tile-sweep rank correlation: ``analyze(rows) -> summary``
* ``report``   ``summary.md``, ``summary.json``, plots
* ``run``      ``run_validation`` and ``main(args)``, the body of ``gpusim validate``

The analysing half works from saved files on a CPU: ``gpusim validate --reanalyze DIR --gpu
CONFIG`` re-predicts recorded points with a new config.
"""
from .analysis import analyze
from .predict import resimulate
from .run import main, run_validation

__all__ = ["analyze", "main", "resimulate", "run_validation"]
