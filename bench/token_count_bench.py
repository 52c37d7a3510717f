"""The one token counter against the two it replaced, on a 200-message request.

Before, the pause view counted each message's text only (``execution/token_count``: 24 tokens for a
21-message ``gpt-4o`` request) while budgets counted with the chat format's overhead
(``models/tokens``: 111). Now both count with ``models.tokens.message_counts`` (the format included).
This times the old text-only count (re-created here, as it was), the old budget count and the one
counter, for an OpenAI model (exact, ``bpe-openai``) and an offline one (estimated). Target: the one
counter at least as fast as the faster of the two it replaced.
"""

from __future__ import annotations

import statistics
import time

import math

from agio_notebook.models.tokens import (PER_MESSAGE, PER_NAME, _message_text, encoding_for, message_counts,
                                         message_text, prompt_tokens)

ROUNDS, N = 7, 30


def request(n: int = 200) -> list[dict]:
    messages = [{"role": "system", "content": "You are a careful assistant who answers with sources."}]
    for i in range(n - 1):
        if i % 3 == 2:
            messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i}: " + "data " * 40})
        elif i % 3 == 1:
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{i + 1}", "type": "function", "function": {"name": "lookup", "arguments": f'{{"q": "item {i}"}}'}}]})
        else:
            messages.append({"role": "user", "content": f"Question {i}: what do we know about topic {i}?"})
    return messages


def old_text_only(messages: list[dict], model: str) -> int:
    """The pause view's count before, as it was: each message's text, encoded whole (no format)."""
    encoding = encoding_for(model)
    return sum(len(encoding.encode(message_text(m), disallowed_special=())) if encoding is not None
               else math.ceil(len(message_text(m)) / 4) for m in messages)


def old_budget(messages: list[dict], model: str) -> int:
    """The budget's count before, as it was: each part encoded with the special-token check."""
    encoding = encoding_for(model)
    total = 0
    for message in messages:
        parts = _message_text(message)
        if encoding is None:
            total += math.ceil(len("".join(parts)) / 4) + 4
            continue
        n = PER_MESSAGE + sum(len(encoding.encode(p, disallowed_special=())) for p in parts)
        total += n + (PER_NAME if message.get("name") else 0)
    return total


def timed(fn) -> float:
    rounds = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        for _ in range(N):
            fn()
        rounds.append((time.perf_counter() - t0) * 1000.0 / N)
    return statistics.median(rounds)


def main() -> None:
    messages = request()
    print(f"{'model':<10} {'counter':<34} {'ms':>7} {'tokens':>7}")
    for model in ("gpt-4o", "scripted"):
        old_text = timed(lambda: old_text_only(messages, model))
        budget_ms = timed(lambda: old_budget(messages, model))
        one = timed(lambda: message_counts(messages, model))
        rows = [("old: text only (pause view)", old_text, old_text_only(messages, model)),
                ("old: with the format (budget)", budget_ms, old_budget(messages, model) + 3),
                ("one counter (everything now)", one, prompt_tokens(messages, model)[0])]
        for name, ms, tokens in rows:
            print(f"{model:<10} {name:<34} {ms:>7.2f} {tokens:>7}")
        print(f"{model:<10} one counter / faster old one: {one / min(old_text, budget_ms):.2f}x (target <= 1.00x)")


if __name__ == "__main__":
    main()
