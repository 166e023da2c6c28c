"""A small decoder-only transformer with random weights, and the GRPO step's two halves on it.

Enough of a causal LM to make generation and training real work (attention, MLP, sampling,
backward, optimizer) without downloading anything. Imports torch: load it only from the sweep.

- ``generate``: autoregressive sampling, a fixed number of new tokens, from a seeded generator,
  so the same weights and seed give the same tokens (the sweep checks it).
- ``group_loss``: the GRPO policy-gradient loss of one group, ``-sum(a_i * mean_t log p) / n``,
  samples without a verdict (advantage ``None``) left out. Summed over groups it is the batch's
  loss, so backward per group gives the barrier's gradient up to floating-point order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from deepgym.exceptions import ConfigError
from deepgym.latency.lmconfig import TinyLMConfig

__all__ = ["TinyCausalLM", "TinyLMConfig", "generate", "group_loss"]


class _Block(nn.Module):
    def __init__(self, cfg: TinyLMConfig) -> None:
        super().__init__()
        self.heads = cfg.n_heads
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.out = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.d_ff), nn.GELU(), nn.Linear(cfg.d_ff, cfg.d_model)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        shape = (b, t, self.heads, d // self.heads)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(y.transpose(1, 2).reshape(b, t, d))
        out: torch.Tensor = x + self.mlp(self.ln2(x))
        return out


class TinyCausalLM(nn.Module):
    """Token and position embeddings, ``n_layers`` pre-norm blocks, a tied output head."""

    def __init__(self, cfg: TinyLMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos = nn.Embedding(cfg.max_len, cfg.d_model)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layers))
        self.ln = nn.LayerNorm(cfg.d_model)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=1.0 / math.sqrt(cfg.d_model))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits ``(batch, time, vocab)`` for token ids ``(batch, time)``."""
        t = ids.shape[1]
        if t > self.cfg.max_len:
            raise ConfigError(f"sequence length {t} exceeds max_len {self.cfg.max_len}")
        x = self.tok(ids) + self.pos(torch.arange(t, device=ids.device))
        for block in self.blocks:
            x = block(x)
        logits: torch.Tensor = self.ln(x) @ self.tok.weight.T
        return logits


@torch.no_grad()
def generate(
    model: TinyCausalLM, prompts: torch.Tensor, new_tokens: int, generator: torch.Generator
) -> torch.Tensor:
    """Prompts ``(batch, p)`` followed by ``new_tokens`` sampled tokens ``(batch, p + new)``."""
    ids = prompts
    for _ in range(new_tokens):
        logits = model(ids)[:, -1, :].float()
        probs = torch.softmax(logits, dim=-1)
        nxt = torch.multinomial(probs, 1, generator=generator)
        ids = torch.cat([ids, nxt], dim=1)
    return ids


def group_loss(
    model: TinyCausalLM,
    sequences: torch.Tensor,
    prompt_len: int,
    advantages: Sequence[float | None],
    batch_size: int,
) -> torch.Tensor | None:
    """The policy-gradient loss of one group (None when no sample in it has a verdict)."""
    keep = [i for i, a in enumerate(advantages) if a is not None]
    if not keep:
        return None
    seqs = sequences[keep]
    adv = torch.tensor([advantages[i] for i in keep], dtype=torch.float32, device=sequences.device)
    logits = model(seqs[:, :-1]).float()
    logp = torch.log_softmax(logits, dim=-1)
    target = seqs[:, 1:]
    token_logp = logp.gather(2, target.unsqueeze(-1)).squeeze(-1)[:, prompt_len - 1 :]
    return -(adv * token_logp.mean(dim=1)).sum() / batch_size
