"""The tiny model's shape, without torch: the sweep's settings embed it, the model reads it."""

from __future__ import annotations

from dataclasses import dataclass

from deepgym.exceptions import ConfigError
from deepgym.validation import positive_int

__all__ = ["TinyLMConfig"]


@dataclass(frozen=True)
class TinyLMConfig:
    """Shape of the model; the defaults keep a CPU step well under a second."""

    vocab_size: int = 256
    d_model: int = 128
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 512
    max_len: int = 128

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_len"):
            positive_int(getattr(self, name), name)
        if self.d_model % self.n_heads:
            raise ConfigError(f"d_model ({self.d_model}) must divide by n_heads ({self.n_heads})")
