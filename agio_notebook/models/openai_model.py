"""OpenAIModel: any OpenAI-compatible chat-completions endpoint, streaming, via the official client.

OpenAI, Azure (pass an ``AsyncAzureOpenAI`` as ``client``), vLLM, Ollama, llama.cpp server. The
client's own retries (with backoff, honouring Retry-After) handle 429 and 5xx; what is left after them
becomes one clear ``ModelError`` line, which never contains the key (servers echo it: every line is
scrubbed). A stream that closes without a finish reason is an error, not an empty answer.

The client's keep-alive connections belong to the event loop that opened them, so each loop the model is
called from (a cell, ``await``, ``run_sync``, a batch, a Ray worker) gets a client of its own, made on
first use and closed with its loop (:mod:`.per_loop`); the clients share one TLS context, so a new loop
costs a new connection, not a new certificate store.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import re
import ssl
from typing import Any, AsyncIterator

from ..core import ModelError, scrub
from ..core.redact import register_secret
from .base import Finish, ModelChunk, TextDelta, ToolCallDelta, Usage
from .per_loop import PerLoop
from .settings import check_settings, merge_settings


_NO_KEY = "not-needed"  # what a local server without keys is sent


class OpenAIModel:
    """``settings`` and ``temperature``/``extra_body`` are the model's own defaults; settings given per agent
    or per run (``stream(..., settings=...)``) override them key by key.

    ``client``: an ``AsyncOpenAI``-compatible client (e.g. ``AsyncAzureOpenAI``), copied for each event loop
    with a connection pool of its own (its key, endpoint, headers, timeout and retries are kept, not its
    HTTP client); or a function that makes one, called once per event loop (to choose the HTTP client too).
    """

    def __init__(self, model: str | None = None, *, base_url: str | None = None, api_key: str | None = None,
                 organization: str | None = None, max_retries: int = 2, timeout: float | None = 600.0,
                 temperature: float | None = None, extra_body: dict[str, Any] | None = None,
                 settings: dict[str, Any] | None = None, include_usage: bool = True, client: Any = None):
        self.model = model or os.environ.get("AGIO_MODEL") or "gpt-4o-mini"
        self.name = self.model
        self.settings = merge_settings({"temperature": temperature, "extra_body": extra_body},
                                       check_settings(settings))
        self.include_usage = include_usage
        self._options: dict[str, Any] | None = None
        self._factory = client if callable(client) else None
        if client is None:
            self._options = {"api_key": api_key or os.environ.get("OPENAI_API_KEY") or _NO_KEY,
                             "base_url": base_url or os.environ.get("OPENAI_BASE_URL") or None,
                             "organization": organization, "max_retries": max_retries, "timeout": timeout}
        self._setup(client)

    def _setup(self, client: Any) -> None:
        if self._options is not None:
            from openai import AsyncOpenAI

            client = AsyncOpenAI(**self._options, http_client=_http_client())
        elif self._factory is not None:
            client = self._factory()
        # never sends a request: it answers for the endpoint (URL, key, retries) and is copied per loop
        self._client = client
        # the key (given, or the one a client holds) is masked by value wherever it would show; a key from
        # OPENAI_API_KEY is a secret-named variable, masked already
        key = getattr(client, "api_key", None)
        register_secret(key if key != _NO_KEY else None)
        self._clients: PerLoop[Any] = PerLoop(self._loop_client, _close_client)

    def _loop_client(self) -> Any:
        if self._factory is not None:
            return self._factory()
        return self._client.copy(http_client=_http_client())

    async def client(self) -> Any:
        """The client of the running event loop (made on its first call there)."""
        return await self._clients.get()

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (to a Ray worker) as its settings: clients and their connections stay in this process."""
        if self._options is None and self._factory is None:
            raise TypeError("an OpenAIModel made with a client object cannot be pickled; pass a function that "
                            "makes the client instead (client=lambda: AsyncAzureOpenAI(...))")
        return {k: v for k, v in self.__dict__.items() if k not in ("_client", "_clients")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._setup(None)

    @property
    def base_url(self) -> str:
        return scrub(str(self._client.base_url).rstrip("/")) or ""

    def __repr__(self) -> str:  # never the key
        return f"OpenAIModel(model={self.model!r}, base_url={self.base_url!r})"

    def redact(self, text: str) -> str:
        """``text`` without this model's key (or anything shaped like a credential)."""
        return scrub(text, (getattr(self._client, "api_key", None),)) or text

    def body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], settings: dict[str, Any] | None = None,
             stream: bool = True) -> dict[str, Any]:
        """The chat-completions parameters sent for a request (``extra_body`` still separate, as the client
        takes it). Wire rules: an assistant message with tool calls and no text gets ``"content": ""``,
        which every server accepts (llama-cpp-python rejects ``null`` there)."""
        params: dict[str, Any] = {"model": self.model, "messages": [_wire_message(m) for m in messages]}
        if tools:
            params["tools"] = tools
        params.update(merge_settings(self.settings, settings))
        if stream:
            params["stream"] = True
            if self.include_usage:
                params["stream_options"] = {"include_usage": True}
        return params

    def _error(self, exc: Exception, *, streamed: int = 0) -> ModelError:
        import openai

        where = f"OpenAI-compatible endpoint {self.base_url}"
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            transient = status == 429 or status >= 500
            retries = self._client.max_retries
            tries = f" (after {retries} {'retry' if retries == 1 else 'retries'})" if transient and retries else ""
            # retryable=False: the client already retried with backoff; the engine must not multiply it
            return ModelError(self.redact(f"{where} returned HTTP {status}{tries}: {_detail(exc)}"),
                              retryable=False, status_code=status)
        if isinstance(exc, openai.APITimeoutError):
            limit = getattr(self._client.timeout, "read", self._client.timeout)  # seconds, or an httpx.Timeout
            said = [f"timeout={limit:g} s"] if isinstance(limit, (int, float)) else []
            if self._client.max_retries:
                said.append(f"tried {self._client.max_retries + 1} times")
            return ModelError(f"{where} timed out" + (f" ({', '.join(said)})" if said else ""))
        transport = isinstance(exc, openai.APIConnectionError) or not isinstance(exc, openai.OpenAIError)
        if streamed and transport:
            return ModelError(self.redact(f"connection to {where} lost mid-stream after {streamed} chunk(s): "
                                          f"{_one_line(_cause(exc))}"))
        if isinstance(exc, openai.APIConnectionError):
            return ModelError(self.redact(f"cannot reach {where}: {_one_line(_cause(exc))}"))
        if isinstance(exc, openai.APIError):  # e.g. an error event inside the stream
            return ModelError(self.redact(f"{where} sent an error: {_detail(exc)}"))
        return ModelError(self.redact(f"{where}: {type(exc).__name__}: {_one_line(str(exc))}"))

    async def stream(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
                     stream: bool = True, settings: dict[str, Any] | None = None) -> AsyncIterator[ModelChunk]:
        params = self.body(messages, tools, settings, stream)
        streamed = 0
        try:
            client = await self.client()
            if not stream:
                whole = _whole_response(await client.chat.completions.create(**params))
                if not _says_something(whole):
                    raise self._empty(whole[-1].reason, "whole")
                for chunk in whole:
                    yield chunk
                return
            response = await client.chat.completions.create(**params)
            finished: str | None = None
            said = False
            blank: list[TextDelta] = []  # whitespace before anything was said: held until text follows
            async with response:  # the connection is released however the stream ends (timeout, cancel)
                async for chunk in response:
                    streamed += 1
                    if chunk.usage is not None:
                        u = chunk.usage
                        yield Usage(u.prompt_tokens, u.completion_tokens, u.total_tokens, _cached(u))
                    for choice in chunk.choices or ():
                        delta = choice.delta
                        if delta is not None:
                            text = delta.content or getattr(delta, "refusal", None)  # a refusal is what it said
                            if text:
                                if not said and not text.strip():
                                    blank.append(TextDelta(text))
                                else:
                                    said = True
                                    for held in blank:
                                        yield held
                                    blank.clear()
                                    yield TextDelta(text)
                            for tc in delta.tool_calls or ():
                                fn = tc.function
                                said = True
                                yield ToolCallDelta(tc.index, tc.id, fn.name if fn else None,
                                                    (fn.arguments or "") if fn else "")
                        if choice.finish_reason:
                            finished = choice.finish_reason
                            if not said:  # an empty streamed answer: asked again without streaming below
                                break
                            yield Finish(choice.finish_reason)
            if finished and not said:
                if finished in _STOPPED:  # cut off or filtered: asking again would pay for the same again
                    raise self._empty(finished, "streamed")
                # Some servers stream nothing for an answer they do give whole (LiteLLM's mock streams no
                # tool calls): ask again without streaming, and say so if that is empty too.
                once = {k: v for k, v in params.items() if k != "stream_options"}
                whole = _whole_response(await client.chat.completions.create(**{**once, "stream": False}))
                if not _says_something(whole):
                    raise self._empty(whole[-1].reason, "streamed and whole")
                for chunk in whole:
                    yield chunk
                return
        except ModelError:
            raise
        except Exception as exc:  # noqa: BLE001 - openai's errors and the transport's, mid-stream
            raise self._error(exc, streamed=streamed) from None
        if not finished:  # e.g. a prompt over the context: 200, then the stream closes with nothing
            raise ModelError(f"OpenAI-compatible endpoint {self.base_url}: stream ended before the model "
                             f"finished (no finish reason after {streamed} chunk(s))")

    def _empty(self, reason: str, how: str) -> ModelError:
        """A reply with no text (or only whitespace) and no tool calls: one line, with why it stopped."""
        why = _STOPPED.get(reason, "")
        return ModelError(f"OpenAI-compatible endpoint {self.base_url} answered {self.model!r} with an empty reply "
                          f"(no text and no tool calls), {how}" + (f"; finish reason {reason!r}{why}"
                                                                    if reason not in ("stop", "tool_calls") else ""))


# finish reasons that say why a reply has nothing in it
_STOPPED = {"length": " (the token limit was reached before any text: raise max_tokens or max_completion_tokens)",
            "content_filter": " (the provider's content filter stopped it)"}


def _says_something(chunks: list[ModelChunk]) -> bool:
    return any(isinstance(c, ToolCallDelta) or isinstance(c, TextDelta) and c.text.strip() for c in chunks)


def _wire_message(message: dict[str, Any]) -> dict[str, Any]:
    if message.get("content") is None and message.get("tool_calls"):
        return {**message, "content": ""}
    return message


def _detail(exc: Any) -> str:
    """The server's own message, without the client's "Error code: 429 - " prefix (the status is said once)."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if isinstance(message, str) and message.strip():
            return _one_line(message)
    text = getattr(exc, "message", None) or str(exc)
    return _one_line(re.sub(r"^Error code: \d+ - ", "", text))


def _cause(exc: BaseException) -> str:
    """The transport's reason (e.g. "Connection refused"), not only the client's generic wrapper."""
    inner = exc.__cause__ or exc.__context__
    text = str(exc)
    if inner is not None and str(inner) and str(inner) not in text:
        text = f"{text} ({inner})" if text else str(inner)
    return text or type(exc).__name__


def _whole_response(response: Any) -> list[ModelChunk]:
    chunks: list[ModelChunk] = []
    choice = response.choices[0]
    message = choice.message
    text = message.content or getattr(message, "refusal", None)  # structured output's refusal: what it said
    if text:
        chunks.append(TextDelta(text))
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


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The TLS context every client shares: the one the HTTP library would make for each client (its
    certificate store, ``SSL_CERT_FILE``/``SSL_CERT_DIR``), made once (~20 ms) instead of once per loop."""
    from openai import DefaultAsyncHttpxClient

    library = importlib.import_module(DefaultAsyncHttpxClient.__mro__[1].__module__.split(".")[0])
    return library.create_ssl_context()


def _http_client() -> Any:
    from openai import DefaultAsyncHttpxClient

    return DefaultAsyncHttpxClient(verify=_tls_context())


async def _close_client(client: Any) -> None:
    with contextlib.suppress(Exception):  # a connection the server already dropped: nothing left to close
        await client.close()
