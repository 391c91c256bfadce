"""Calibration: microbenchmarks on a real GPU -> a measured GPU config YAML and its raw JSON.

Modules, data flowing down:

* ``plan``     sizes and repetition counts (``FULL``, ``QUICK``)
* ``bench``    the hand-written Triton microbenchmark kernels and their launchers
* ``ops``      DSL microbenchmarks through the Triton backend (SIMT ops, launch, overlap, CTAs)
* ``driver``, ``memory``, ``compute``  the stages, each filling the ``Calibrator``'s raw numbers
* ``fit``      pure: statistics, timings -> config numbers, ``build_config``, ``write_config``
* ``runner``   the ``Calibrator``, ``main(args)`` and ``main_ops(args)``: ``gpusim calibrate``

=================================  ===========================================================
field                              benchmark
=================================  ===========================================================
hbm_read/write_bandwidth           streaming read / write kernels over GiB-sized buffers
l2_bandwidth_bytes_per_s           one launch sweeping a W-byte buffer P times, plateau W<=16 MiB
sm_load_bytes_per_clk              the same L2-resident sweep with 4-8 CTAs (one per SM)
l2/hbm_latency_cycles              one-warp pointer chasing over a random cycle (.cg loads)
tensor_flops_per_s, tile eff.      each CTA repeats ``acc = tl.dot(a, b, acc)`` on one tile
fp32_flops_per_s                   long chains of x = x * a + b (2 FLOPs per FMA)
sfu_ops_per_clk_per_sm             long chains of x = exp2(x) * c
simt_lane_ops_per_clk_per_sm       ``ops`` (DSL op loops through the Triton backend)
launch/sync_overhead_us            do_bench of 1..4 back-to-back launches of a tiny DSL kernel
tensor_simt_overlap, cta_dispatch  ``ops.measure_overlap``, ``ops.measure_cta_dispatch``
sm_count, clock_hz, l2_bytes, ...  what the driver reports (torch / Triton / nvidia-smi)
=================================  ===========================================================

Everything is timed with ``triton.testing.do_bench`` (median; it clears the L2 before every
repetition) and each number is the median of several do_bench calls, reported with its spread.
The pure parts (``fit``, ``plan``) run without a GPU; triton and torch are imported inside
functions only.
"""
from .fit import build_config, write_config
from .runner import Calibrator, main, main_ops

__all__ = ["Calibrator", "build_config", "main", "main_ops", "write_config"]
