"""Transformer layers and whole models composed from the built-in kernels."""
from .spec import ModelError, ModelSpec, load_model, preset_names

__all__ = ["ModelError", "ModelSpec", "load_model", "preset_names"]
from .simulate import ModelResult, simulate_model  # noqa: E402

__all__ += ["ModelResult", "simulate_model"]
