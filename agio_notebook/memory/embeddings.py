"""Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint, for hybrid retrieval.

Vectors are stored in the memory journal (keyed by model and record) the first time a retrieval
needs them, so adding a record never waits on the network. When the endpoint fails, retrieval goes
on lexically and says so once per endpoint (a warning), not once per run.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

_warned: set[str] = set()
_clients: dict[tuple["Embeddings", str], Any] = {}


@dataclass(frozen=True)
class Embeddings:
    """Which endpoint and model embed memory. The key comes from ``api_key_env``, never stored."""

    model: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 10.0

    def embed(self, texts: list[str]) -> np.ndarray:
        """One request for all ``texts``; rows are L2-normalised."""
        import numpy as np
        import openai

        key = os.environ.get(self.api_key_env) or "not-needed"
        client = _clients.get((self, key))
        if client is None:  # one client (and TLS context) per endpoint and key, not one per call
            client = _clients[(self, key)] = openai.OpenAI(api_key=key, base_url=self.base_url,
                                                           timeout=self.timeout, max_retries=0)
        data = client.embeddings.create(model=self.model, input=texts).data
        vectors = np.array([d.embedding for d in sorted(data, key=lambda d: d.index)], dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)


def warn_once(embeddings: Embeddings, exc: BaseException) -> None:
    """The endpoint is down: say so once, scrubbed of anything key-like (the message names the endpoint)."""
    where = f"{embeddings.model} at {embeddings.base_url or 'the default endpoint'}"
    if where in _warned:
        return
    _warned.add(where)
    warnings.warn(f"agio memory: the embeddings endpoint ({where}) failed ({type(exc).__name__}); "
                  "retrieval falls back to lexical ranking (BM25)", RuntimeWarning, stacklevel=3)
