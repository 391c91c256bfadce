"""The ``--set KEY=VALUE`` parser and the bounded YAML reader, both in ``gpusim.yamlio`` (below the
GPU config loader and the model scenarios, which use them too), re-exported here."""
from ..yamlio import (MAX_EXPANDED_NODES, MAX_FILE_BYTES, InputError, apply_set, loads, parse_assignment,  # noqa: F401
                      read_text_bounded, read_yaml, storage_path)
