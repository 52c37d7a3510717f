"""Scrub secrets from text before it is stored or shown: the one home of secret masking.

Providers echo what they were sent: a 401 says "Incorrect API key provided: sk-…", a proxy quotes the
``Authorization`` header, a URL carries ``user:password@``.  Every error line passes through
:func:`scrub` before it reaches a step, a run record, an event or a cell's output, and every renderer
(the notebook's live view and saved transcript, the MCP and A2A transcripts, OpenTelemetry attributes,
exports) passes what it shows through :func:`mask`.

Two kinds of secret are removed: values the process knows (:func:`known_secrets`: secret-named
environment variables, a store URL's password, and values registered with :func:`register_secret`,
such as a configured API key or a server's token), whatever their shape; and text shaped like a
credential (``sk-…``, ``Authorization: …``, ``api_key=…``, ``user:password@``).
"""

from __future__ import annotations

import base64
import os
import re
import threading
from typing import Any, Iterable
from urllib.parse import parse_qsl, quote, unquote, urlsplit

MASK = "***"
MIN_SECRET = 8  # shorter values are never masked by value: masking must not shred ordinary words

# environment variables whose values are secrets: the well-known ones and any name that says so
_SECRET_ENV = re.compile(r"(?i)(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|ACCESS_KEY)$")
_URL_ENV = ("AGIO_STORE", "DATABASE_URL")
_registered: set[str] = set()
_registered_lock = threading.Lock()


def register_secret(value: str | None) -> None:
    """Remember ``value`` as a secret of this process: every later :func:`scrub` and :func:`mask` removes it."""
    if isinstance(value, str) and len(value) >= MIN_SECRET:
        with _registered_lock:
            _registered.add(value)


_env_names: tuple[tuple[Any, ...], tuple[str, ...], tuple[str, ...]] = ((), (), ())
_known: tuple[tuple[Any, ...], list[str]] = ((), [])


def _secret_env_names() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The names of the environment's secret-named variables, and of its URL variables: matched again only
    when the set of names changes (a step masks its text; it must not scan the environment each time)."""
    global _env_names
    keys = _environ_keys()
    if keys != _env_names[0]:
        names = tuple(os.environ)
        _env_names = (keys, tuple(n for n in names if _SECRET_ENV.search(n)), tuple(n for n in names if n in _URL_ENV))
    return _env_names[1], _env_names[2]


def _environ_keys() -> tuple[Any, ...]:
    """The environment's names as CPython keeps them (bytes, not decoded: decoding every name was most of
    a masked step's cost), or decoded where the mapping has no such store."""
    data = getattr(os.environ, "_data", None)
    return tuple(data) if isinstance(data, dict) else tuple(os.environ)


def known_secrets() -> list[str]:
    """The secret values this process knows, longest first (so a secret containing another goes whole)."""
    global _known
    secret_names, url_names = _secret_env_names()
    env = os.environ
    key = (frozenset(_registered), *(env.get(n) for n in secret_names), *(env.get(n) for n in url_names))
    if key != _known[0]:
        found = set(_registered)
        found.update(v for v in (env.get(n) for n in secret_names) if v)
        for value in (env.get(n) for n in url_names):
            if value and "://" in value:
                found.update(url_secrets(value))
        _known = (key, sorted((s for s in found if len(s) >= MIN_SECRET), key=len, reverse=True))
    return _known[1]

_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")


def _mask_scheme(found: re.Match[str]) -> str:
    """"Basic <credential>" or "Bearer <token>" with the credential masked; prose left as it was. Basic's
    credential is base64, so what follows it ("…==." at the end of a sentence) is not part of it."""
    scheme, word = found[1], found[2]
    if scheme.lower() == "basic":
        base64_part = _BASE64.match(word)
        word = base64_part[0] if base64_part else ""
    if not _credential(scheme, word):
        return found[0]
    return f"{scheme} {MASK}{found[2][len(word):]}"


def _credential(scheme: str, word: str) -> bool:
    """Whether the word after "Basic" or "Bearer" is a credential, not prose ("Basic arithmetic", "a basic
    PostgreSQL setup", "Basic 2023-2024 figures"): Basic's is base64 of ``user:password`` (UTF-8, or Latin-1
    as older clients send it), a bearer token is long, with letters and digits both."""
    if scheme.lower() == "basic":
        try:
            raw = base64.b64decode(word + "=" * (-len(word) % 4), validate=True)
        except ValueError:  # not base64
            return False
        try:
            pair = raw.decode()
        except UnicodeDecodeError:  # Latin-1, as older clients send a password: its user name in ASCII
            pair = raw.decode("latin-1")
            user = pair.partition(":")[0]
            if not (user.isascii() and user.isprintable() and " " not in user and user):
                return False  # what a word ("OutputSpec") or a random string decodes to, mostly
        # a tab is a control character a credential should not hold, but may: masking it costs nothing
        return ":" in pair and pair.replace("\t", " ").isprintable()
    return len(word) >= 16 and any(c.isdigit() for c in word) and any(c.isalpha() for c in word)


# (pattern, replacement): the secret part of each match becomes MASK, its label stays readable.
_PATTERNS: tuple[tuple[re.Pattern[str], Any], ...] = (
    # "Authorization: Bearer abc", "'authorization': 'Basic abc'", "Proxy-Authorization=…"
    (re.compile(r"""(?i)((?:proxy-)?authorization['"]?\s*[:=]\s*['"]?)(?:(bearer|basic|token)\s+)?[^\s'",;}]+"""),
     lambda m: f"{m[1]}{m[2] + ' ' if m[2] else ''}{MASK}"),
    # a bare "Bearer <token>", "Basic <base64>" with a token's shape (see _token), so that prose ("Basic
    # arithmetic", "bearer instruments", "Basic Understanding") is never taken for one
    (re.compile(r"(?i)\b(bearer|basic)\s+([A-Za-z0-9._~+/=-]{8,})"), _mask_scheme),
    # OpenAI-style keys: sk-…, sk-proj-…, and the partly masked form servers echo (sk-abc***xyz)
    (re.compile(r"\bsk-[A-Za-z0-9_*.-]{6,}"), "sk-" + MASK),
    # api_key=…, "x-api-key": "…", apikey: …
    (re.compile(r"""(?i)((?:x-)?api[-_]?key['"]?\s*[:=]\s*['"]?)[^\s'",;}&]+"""), r"\1" + MASK),
    # credentials in URLs: scheme://user:password@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@"), r"\1" + MASK + "@"),
)


def scrub(text: str | None, secrets: Iterable[str | None] = ()) -> str | None:
    """``text`` with every known secret and everything shaped like a credential replaced by ``***``.

    ``secrets`` are exact values to remove besides the process's :func:`known_secrets`; values shorter
    than 4 characters are ignored so that masking never shreds ordinary words.
    """
    if not text:
        return text
    extra = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)
    return _scrub(text, [*extra, *known_secrets()])


def _scrub(text: str, values: list[str]) -> str:
    """``text`` scrubbed; the very same object when nothing was found (so :func:`mask` copies nothing)."""
    original = text
    for secret in values:
        if secret in text:
            text = text.replace(secret, MASK)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return original if text == original else text


def mask(data: Any) -> Any:
    """``data`` (JSON-like: dicts, lists, strings) with every string scrubbed; a new structure where
    something changed, the same objects where nothing did. What every renderer shows goes through it."""
    values = known_secrets()

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return _scrub(value, values) if value else value
        if isinstance(value, dict):
            out = {k: walk(v) for k, v in value.items()}
            return value if all(out[k] is value[k] for k in value) else out
        if isinstance(value, (list, tuple)):
            items = [walk(v) for v in value]
            return value if all(a is b for a, b in zip(items, value)) else type(value)(items)
        return value

    return walk(data)


def mask_known(text: str) -> str:
    """``text`` without the values of :func:`known_secrets` (no pattern matching): what the engine applies
    to a step's text before it is stored or sent, so a tool that echoes a key never stores it."""
    for secret in known_secrets():
        if secret in text:
            text = text.replace(secret, MASK)
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
