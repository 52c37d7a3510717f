"""Models: the streaming protocol, an OpenAI-compatible provider, and offline doubles."""

from __future__ import annotations

import os

from .base import Finish, Model, ModelChunk, TextDelta, ToolCallDelta, Usage
from .offline import offline_model
from .openai_model import OpenAIModel
from .pricing import cost_of, set_prices
from .replay import ReplayMismatchError, ReplayModel, export_cassette
from .scripted import FunctionModel, Latency, Reply, ScriptedModel, ToolCallSpec, call
from .tokens import count_tokens


def default_model() -> Model:
    """Offline unless an endpoint is configured (``OPENAI_API_KEY``, ``OPENAI_BASE_URL`` or ``AGIO_MODEL``)."""
    if any(os.environ.get(v) for v in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGIO_MODEL")):
        return OpenAIModel()
    return offline_model()


__all__ = [
    "Finish", "FunctionModel", "Latency", "Model", "ModelChunk", "OpenAIModel", "Reply", "ReplayMismatchError",
    "ReplayModel", "ScriptedModel", "TextDelta", "ToolCallDelta", "ToolCallSpec", "Usage", "call", "cost_of",
    "count_tokens",
    "default_model", "export_cassette", "offline_model", "set_prices",
]
