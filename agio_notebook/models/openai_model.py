"""OpenAIModel: any OpenAI-compatible chat-completions endpoint, streaming, via the official client.

OpenAI, Azure (pass an ``AsyncAzureOpenAI`` as ``client``), vLLM, Ollama, llama.cpp server. The
client's own retries (with backoff, honouring Retry-After) handle 429 and 5xx; what is left after them
becomes one clear ``ModelError`` line, which never contains the key.
"""

from __future__ import annotations

import os
from typing import Any, AsyncIterator

from ..core import ModelError
from .base import Finish, ModelChunk, TextDelta, ToolCallDelta, Usage


class OpenAIModel:
    def __init__(self, model: str | None = None, *, base_url: str | None = None, api_key: str | None = None,
                 organization: str | None = None, max_retries: int = 2, timeout: float | None = 120.0,
                 temperature: float | None = None, extra_body: dict[str, Any] | None = None,
                 include_usage: bool = True, client: Any = None):
        self.model = model or os.environ.get("AGIO_MODEL") or "gpt-4o-mini"
        self.name = self.model
        self.temperature = temperature
        self.extra_body = extra_body
        self.include_usage = include_usage
        if client is None:
            from openai import AsyncOpenAI

            client = AsyncOpenAI(api_key=api_key or os.environ.get("OPENAI_API_KEY") or "not-needed",
                                 base_url=base_url or os.environ.get("OPENAI_BASE_URL") or None,
                                 organization=organization, max_retries=max_retries, timeout=timeout)
        self._client = client

    @property
    def base_url(self) -> str:
        return str(self._client.base_url).rstrip("/")

    def __repr__(self) -> str:  # never the key
        return f"OpenAIModel(model={self.model!r}, base_url={self.base_url!r})"

    def _error(self, exc: Exception) -> ModelError:
        import openai

        status = getattr(exc, "status_code", None)
        if isinstance(exc, openai.APIStatusError):
            detail = getattr(exc, "message", None) or str(exc)
            transient = status == 429 or (status or 0) >= 500
            tries = f" (after {self._client.max_retries} retries)" if transient and self._client.max_retries else ""
            # retryable=False: the client already retried with backoff; the engine must not multiply it
            return ModelError(f"OpenAI-compatible endpoint {self.base_url} returned {status}{tries}: "
                              f"{_one_line(detail)}", retryable=False, status_code=status)
        if isinstance(exc, openai.APITimeoutError):
            return ModelError(f"OpenAI-compatible endpoint {self.base_url} timed out")
        if isinstance(exc, openai.APIConnectionError):
            return ModelError(f"cannot reach OpenAI-compatible endpoint {self.base_url}: {_one_line(str(exc))}")
        return ModelError(f"OpenAI-compatible endpoint {self.base_url}: {type(exc).__name__}: "
                          f"{_one_line(str(exc))}")

    async def stream(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                     stream: bool = True) -> AsyncIterator[ModelChunk]:
        import openai

        params: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            params["tools"] = tools
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.extra_body:
            params["extra_body"] = self.extra_body
        try:
            if not stream:
                response = await self._client.chat.completions.create(**params)
                for chunk in _whole_response(response):
                    yield chunk
                return
            if self.include_usage:
                params["stream_options"] = {"include_usage": True}
            response = await self._client.chat.completions.create(stream=True, **params)
            async for chunk in response:
                if chunk.usage is not None:
                    u = chunk.usage
                    yield Usage(u.prompt_tokens, u.completion_tokens, u.total_tokens, _cached(u))
                for choice in chunk.choices or ():
                    delta = choice.delta
                    if delta is not None:
                        if delta.content:
                            yield TextDelta(delta.content)
                        for tc in delta.tool_calls or ():
                            fn = tc.function
                            yield ToolCallDelta(tc.index, tc.id, fn.name if fn else None,
                                                (fn.arguments or "") if fn else "")
                    if choice.finish_reason:
                        yield Finish(choice.finish_reason)
        except openai.OpenAIError as exc:
            raise self._error(exc) from None


def _whole_response(response: Any) -> list[ModelChunk]:
    chunks: list[ModelChunk] = []
    choice = response.choices[0]
    message = choice.message
    if message.content:
        chunks.append(TextDelta(message.content))
    for i, tc in enumerate(message.tool_calls or ()):
        chunks.append(ToolCallDelta(i, tc.id, tc.function.name, tc.function.arguments or ""))
    if response.usage is not None:
        u = response.usage
        chunks.append(Usage(u.prompt_tokens, u.completion_tokens, u.total_tokens, _cached(u)))
    chunks.append(Finish(choice.finish_reason or "stop"))
    return chunks


def _cached(usage: Any) -> int | None:
    """Prompt tokens served from the provider's cache (OpenAI: ``prompt_tokens_details.cached_tokens``)."""
    details = getattr(usage, "prompt_tokens_details", None)
    return getattr(details, "cached_tokens", None) if details is not None else None


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
