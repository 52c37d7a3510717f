"""Scrub secrets from text before it is stored or shown.

Providers echo what they were sent: a 401 says "Incorrect API key provided: sk-…", a proxy quotes the
``Authorization`` header, a URL carries ``user:password@``.  Every error line passes through
:func:`scrub` before it reaches a step, a run record, an event or a cell's output.
"""

from __future__ import annotations

import re
from typing import Any, Iterable
from urllib.parse import parse_qsl, quote, unquote, urlsplit

MASK = "***"

# (pattern, replacement): the secret part of each match becomes MASK, its label stays readable.
_PATTERNS: tuple[tuple[re.Pattern[str], Any], ...] = (
    # "Authorization: Bearer abc", "'authorization': 'Basic abc'", "Proxy-Authorization=…"
    (re.compile(r"""(?i)((?:proxy-)?authorization['"]?\s*[:=]\s*['"]?)(?:(bearer|basic|token)\s+)?[^\s'",;}]+"""),
     lambda m: f"{m[1]}{m[2] + ' ' if m[2] else ''}{MASK}"),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 " + MASK),
    # OpenAI-style keys: sk-…, sk-proj-…, and the partly masked form servers echo (sk-abc***xyz)
    (re.compile(r"\bsk-[A-Za-z0-9_*.-]{6,}"), "sk-" + MASK),
    # api_key=…, "x-api-key": "…", apikey: …
    (re.compile(r"""(?i)((?:x-)?api[-_]?key['"]?\s*[:=]\s*['"]?)[^\s'",;}&]+"""), r"\1" + MASK),
    # credentials in URLs: scheme://user:password@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@"), r"\1" + MASK + "@"),
)


def scrub(text: str | None, secrets: Iterable[str | None] = ()) -> str | None:
    """``text`` with every known secret and everything shaped like a credential replaced by ``***``.

    ``secrets`` are exact values to remove (the configured key); values shorter than 4 characters are
    ignored so that masking never shreds ordinary words.
    """
    if not text:
        return text
    for secret in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


_SECRET_PARAMS = ("password", "sslpassword", "passfile", "sslkey", "token", "api_key", "apikey")


def url_secrets(url: str) -> list[str]:
    """The secret values a URL carries (its password, as written and decoded; secret query values)."""
    found: list[str] = []
    match = re.match(r"^[a-z0-9+.-]+://([^/?#]*)@", url, re.I)
    if match and ":" in match.group(1):
        raw = match.group(1).split(":", 1)[1]
        found += [raw, unquote(raw)]
    for key, value in parse_qsl(urlsplit(url).query, keep_blank_values=True):
        if key.lower() in _SECRET_PARAMS and value:
            found += [value, quote(value)]
    return [f for f in found if f]


def redact_url(url: str) -> str:
    """A URL without its password (in the authority or the query), for messages."""
    text = re.sub(r"^([a-z0-9+.-]+://[^:/?#@]+):[^@]*@", r"\1:***@", url, flags=re.I)
    return re.sub(r"(?i)([?&](?:%s)=)[^&#]*" % "|".join(_SECRET_PARAMS), r"\1***", text)
