# Triton device functions of FlagGems (src/flag_gems/utils/triton_lang_extension.py), the two that
# its kernels use for program ids.
# Source: https://github.com/FlagOpen/FlagGems/blob/532ff438c70343d7aec9becdabb76a71225a0553/src/flag_gems/utils/triton_lang_extension.py
# Commit: 532ff438c70343d7aec9becdabb76a71225a0553
# License: Apache License 2.0 (Copyright 2024 BAAI); see LICENSE in the repository.
# The functions below are copied unmodified; the rest of the module is left out.
import triton
from triton import language as tl


@triton.jit
def program_id(
    axis: int,
) -> tl.tensor:
    return tl.program_id(axis).to(tl.int64)


@triton.jit
def num_programs(
    axis: int,
) -> tl.tensor:
    return tl.num_programs(axis).to(tl.int64)
