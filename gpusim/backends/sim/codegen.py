"""What the compiler decides below the tile, as pure cost functions the engine charges. Each
mechanism lives in its own module, whose docstring says what it models, the microbenchmark that
measured it and what it earns (docs/model.md, "Ablation"):

* ``access``: global-access vector width, the load/store port's narrow rate;
* ``staging``: cp.async or LDG + STS into shared memory, one-stage loops, unaligned staged rows;
* ``hbm_pieces``: short DRAM pieces; ``round_trip``: a tile's round trip by its lines;
  ``coalescer``: the L2 request coalescer;
* ``spills``, ``issue``, ``unroll``, ``duplication``, ``warp`` (the scoreboard): the compiled loop
  body's spills, instruction mix, unrolling, duplicated tensor work and dependent latency;
  ``compiled_steps`` applies them to a step list.

This module re-exports their public names under the old path.
"""
from .access import VECTOR_BYTES, port_bytes, port_width, pow2_divisor, store_port_bytes, vector_width  # noqa: F401
from .coalescer import coalesced_fraction, merged_share  # noqa: F401
from .compiled_steps import adjust_loops  # noqa: F401
from .duplication import tensor_duplication  # noqa: F401
from .hbm_pieces import hbm_piece_cost  # noqa: F401
from .issue import SFU_OPCODES, TENSOR_OPCODES, body_mixes, loop_issue_cycles  # noqa: F401
from .round_trip import request_latency  # noqa: F401
from .spills import REGISTER_BYTES, loop_spill_bytes_per_thread, spill_bytes_per_iteration  # noqa: F401
from .staging import copies_async, one_stage_serial, staging_class, staging_cost  # noqa: F401
from .unroll import arithmetic_unroll, unroll_factor  # noqa: F401
from .warp import loop_latency_cycles, straight_cycles  # noqa: F401
