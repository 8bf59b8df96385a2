"""pytest-inferaccept: acceptance tests for OpenAI-compatible LLM inference servers."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
