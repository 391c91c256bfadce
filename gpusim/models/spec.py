"""A transformer's shape, read from a small YAML file or a preset name."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

PRESETS = Path(__file__).parent / "presets"
DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4}


class ModelError(ValueError):
    """A model file or preset that cannot be used; the message names the file and field."""


class ModelSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)    # strict: layers: true is not 1 layer
    name: str
    hidden: int = Field(gt=0, description="hidden size d_model")
    heads: int = Field(gt=0, description="query heads")
    kv_heads: int = Field(gt=0, description="key/value heads (GQA); equal to heads for MHA")
    head_dim: int = Field(gt=0)
    ffn: int = Field(gt=0, description="FFN inner size")
    activation: Literal["swiglu", "gelu"]
    norm: Literal["rmsnorm", "layernorm"]
    rope: bool = True
    layers: int = Field(gt=0)
    vocab: int = Field(gt=0)
    dtype: Literal["fp16", "bf16", "fp32"] = "bf16"
    tied_embeddings: bool = False

    @model_validator(mode="after")
    def _heads_divide(self):
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        return self

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    def layer_params(self) -> int:
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        attn = self.hidden * (q + 2 * kv) + q * self.hidden
        mlp = (3 if self.activation == "swiglu" else 2) * self.hidden * self.ffn
        return attn + mlp + 2 * self.hidden  # two norm weights

    def params(self) -> int:
        emb = self.vocab * self.hidden
        return self.layers * self.layer_params() + emb * (1 if self.tied_embeddings else 2) + self.hidden

    def weight_bytes(self) -> int:
        return self.params() * self.dtype_bytes

    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESETS.glob("*.yaml"))


def load_model(ref: str | Path | dict | ModelSpec, *, dtype: str | None = None) -> ModelSpec:
    """A preset name, a YAML path or a dict -> ModelSpec; ModelError on bad input."""
    if isinstance(ref, ModelSpec):
        spec = ref
    else:
        where, data = "model", ref
        if not isinstance(ref, dict):
            path = Path(ref)
            if (PRESETS / f"{ref}.yaml").exists() and not path.exists():
                path = PRESETS / f"{ref}.yaml"
            if not path.exists():
                raise ModelError(f"model {ref!r}: no such file or preset (presets: {', '.join(preset_names())})")
            from ..errors import ScenarioError
            from ..yamlio import read_yaml

            try:      # bounded: a regular file of at most 1 MiB, YAML 1.2 scalars, no key twice
                where, data = str(path), read_yaml(path, "a model YAML file")
            except ScenarioError as e:
                raise ModelError(str(e)) from None
        try:
            spec = ModelSpec.model_validate(data)
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(str(x) for x in err["loc"]) or "model"
            raise ModelError(f"{where}: field {field!r}: {err['msg']}") from None
    return spec.model_copy(update={"dtype": dtype}) if dtype else spec
