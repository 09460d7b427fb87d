"""Instruction text embeddings, computed once per (encoder, text) and cached.

An env's instruction list is fixed, so a VLA never runs its language tower per step: the
``(L, D)`` table is computed on first use and rows are picked by ``obs["instruction"]``.
The cache lives in memory for the process; with ``cache_dir`` it is also written to disk as
a safetensors file keyed by the encoder's name and the texts, so a later run skips the encoder.
"""

from __future__ import annotations

import hashlib
import logging
import os
from typing import Protocol

import torch

log = logging.getLogger(__name__)

_MEMORY: dict[tuple[str, str], torch.Tensor] = {}


class TextEncoder(Protocol):
    """Anything with a stable ``name`` and ``encode(texts) -> (L, D)`` float tensor."""

    name: str

    def encode(self, texts: list[str]) -> torch.Tensor:
        """``(L, D)`` embeddings of ``texts``."""
        ...


def _key(encoder_name: str, texts: list[str]) -> str:
    return hashlib.sha256(("\x00".join([encoder_name, *texts])).encode()).hexdigest()[:16]


def cached_embeddings(encoder: TextEncoder, texts: list[str], cache_dir: str | None = None) -> torch.Tensor:
    """``(L, D)`` CPU float32 embeddings of ``texts``; each distinct text is encoded at most once.

    Args:
        encoder: the text encoder (its ``name`` is part of the cache key).
        texts: instruction strings.
        cache_dir: optional directory for an on-disk cache (``<hash>.safetensors``).

    """
    missing = [t for t in dict.fromkeys(texts) if (encoder.name, t) not in _MEMORY]
    if missing and cache_dir:
        path = os.path.join(cache_dir, f"{_key(encoder.name, missing)}.safetensors")
        if os.path.isfile(path):
            from safetensors.torch import load_file

            table = load_file(path)["embeddings"]
            _MEMORY.update({(encoder.name, t): row for t, row in zip(missing, table, strict=True)})
            missing = []
    if missing:
        log.info("encoding %d instruction(s) with %s", len(missing), encoder.name)
        with torch.no_grad():
            table = encoder.encode(missing).detach().float().cpu()
        _MEMORY.update({(encoder.name, t): row for t, row in zip(missing, table, strict=True)})
        if cache_dir:
            from safetensors.torch import save_file

            os.makedirs(cache_dir, exist_ok=True)
            save_file({"embeddings": table.contiguous()},
                      os.path.join(cache_dir, f"{_key(encoder.name, missing)}.safetensors"))
    return torch.stack([_MEMORY[(encoder.name, t)] for t in texts])


def clear_cache() -> None:
    """Forget every in-memory embedding (tests, or after changing an encoder's weights)."""
    _MEMORY.clear()
