"""``web_fetch()``: GET a URL through httpx, safely, and return readable text.

- SSRF: the host is resolved once, every address is checked (loopback, private, link-local, multicast,
  reserved and unspecified addresses are refused) and the connection goes to the checked address (the
  URL's host travels in the Host header and as the TLS server name), so a second DNS answer cannot
  rebind it.  Each redirect hop is checked the same way, up to ``max_redirects``.
- ``allow`` lists hosts (as written in URLs) or IP networks the block does not apply to, e.g. a local
  test server: ``web_fetch(allow=["127.0.0.1"])``.  A name that merely resolves into an allowed
  network is still refused; the allowlist is for what you write, not for what DNS answers.
- A timeout, a byte cap enforced while streaming (a 1 GB body is cut at the cap, never buffered), and
  handling by content type: HTML to Markdown (markdownify), text and JSON as is, anything else refused.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

from ..tools import Tool, tool
from .actions import recorded
from .errors import ActionError, check_positive

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class WebLimits:
    timeout: float = 15.0
    max_bytes: int = 2_000_000
    max_chars: int = 40_000  # of the text handed to the model
    max_redirects: int = 5

    def __post_init__(self) -> None:
        check_positive(self, zero_ok=("max_redirects",))


_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, Teredo, NAT64): it is where packets end up."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def blocked_reason(address: IPAddress) -> str | None:
    """Why an address may not be fetched (None: a public address). Anything not globally routable is
    blocked: loopback, private, link-local, shared (100.64.0.0/10, cloud metadata and carrier NAT), ..."""
    if address.version == 6:
        embedded = _embedded_ipv4(address)  # type: ignore[arg-type]
        if embedded is not None:
            address = embedded
    for label, flag in (("loopback", address.is_loopback), ("unspecified", address.is_unspecified),
                        ("link-local", address.is_link_local), ("multicast", address.is_multicast),
                        ("reserved", address.is_reserved), ("private", address.is_private)):
        if flag:
            return label
    if not address.is_global:
        return "non-public"  # e.g. shared 100.64.0.0/10 (cloud metadata, carrier NAT)
    return None


class Guard:
    """Decides where a URL may be fetched from, and which address to connect to."""

    def __init__(self, allow: list[str] | tuple[str, ...] = ()):
        self.hosts: set[str] = set()
        self.networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for entry in allow:
            try:
                self.networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                self.hosts.add(entry.lower().rstrip("."))

    def check(self, url: str) -> tuple[str, str, int, str]:
        """(scheme, host, port, address to connect to) or ActionError."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise ActionError(f"only http and https URLs can be fetched, not {parts.scheme or 'no scheme'!r}")
        host = (parts.hostname or "").lower().rstrip(".")
        if not host:
            raise ActionError(f"URL {url!r} has no host")
        if parts.username or parts.password:
            raise ActionError("URLs with credentials are not fetched")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            literal: IPAddress | None = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        if literal is not None:
            if any(literal in net for net in self.networks) or host in self.hosts:
                return parts.scheme, host, port, str(literal)
            reason = blocked_reason(literal)
            if reason:
                raise ActionError(f"blocked: {host} is a {reason} address (SSRF protection); "
                                  "allow it explicitly with web_fetch(allow=[...])")
            return parts.scheme, host, port, str(literal)
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise ActionError(f"cannot resolve {host}: {exc.strerror}") from None
        addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
        if host not in self.hosts:
            for address in addresses:
                reason = blocked_reason(address)
                if reason:
                    raise ActionError(f"blocked: {host} resolves to {address}, a {reason} address (SSRF "
                                      "protection); allow the host explicitly with web_fetch(allow=[...])")
        return parts.scheme, host, port, str(addresses[0])


SAFE_SCHEMES = frozenset({"http", "https", "mailto", "ftp"})
_SCHEME = re.compile(r"([a-zA-Z][a-zA-Z0-9+.\-]*):")
_IGNORED_IN_URLS = re.compile(r"[\x00-\x20\x7f]+")


def link_scheme(target: str) -> str | None:
    """The scheme a browser would see in a link target (entities already decoded by the parser): ASCII
    whitespace and control characters anywhere are ignored, as browsers do, and case does not count.
    None for a relative link."""
    match = _SCHEME.match(_IGNORED_IN_URLS.sub("", target))
    return match.group(1).lower() if match else None


def _drop_unsafe_targets(soup: Any) -> None:
    """``javascript:``, ``vbscript:``, ``data:`` and any other non-web target never reaches the model:
    a link keeps its text and loses its target, an image keeps its alt text."""
    for tag, attribute in (("a", "href"), ("img", "src")):
        for node in soup.find_all(tag):
            target = node.get(attribute)
            if target is None:
                continue
            scheme = link_scheme(target if isinstance(target, str) else " ".join(target))
            if scheme is not None and scheme not in SAFE_SCHEMES:
                if tag == "a":
                    node.unwrap()
                else:
                    node.replace_with(node.get("alt") or "")


def to_markdown(html: str) -> str:
    """Readable Markdown; scripts, styles and the like are dropped with their content, and links or
    images whose target is not a web address keep only their text."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    for node in soup(["script", "style", "noscript", "iframe", "template", "svg", "title"]):
        node.decompose()
    _drop_unsafe_targets(soup)
    return MarkdownConverter(heading_style="ATX").convert_soup(soup).strip()


def fetch(url: str, guard: Guard, limits: WebLimits) -> dict[str, Any]:
    """The fetch itself: checked hops, a streamed and capped body, text by content type."""
    import httpx

    deadline = time.monotonic() + limits.timeout
    hops: list[dict[str, Any]] = []
    with httpx.Client(timeout=limits.timeout, follow_redirects=False, trust_env=False) as client:
        current = url
        for _ in range(limits.max_redirects + 1):
            scheme, host, port, address = guard.check(current)
            parts = urlsplit(current)
            netloc = f"[{address}]" if ":" in address else address
            target = parts._replace(netloc=f"{netloc}:{port}").geturl()
            default_port = port == (443 if scheme == "https" else 80)
            headers = {"Host": host if default_port else f"{host}:{port}", "User-Agent": "agio-notebook web_fetch"}
            with client.stream("GET", target, headers=headers, extensions={"sni_hostname": host}) as response:
                hops.append({"url": current, "status": response.status_code, "address": address})
                if response.is_redirect and "location" in response.headers:
                    current = urljoin(current, response.headers["location"])
                    continue
                ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
                declared = response.headers.get("content-length")
                if declared and declared.isdigit() and int(declared) > limits.max_bytes:
                    raise ActionError(f"refused: {current} is {int(declared)} bytes, over the "
                                      f"{limits.max_bytes}-byte limit")
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > limits.max_bytes:
                        raise ActionError(f"refused: {current} sent more than {limits.max_bytes} bytes")
                    if time.monotonic() > deadline:
                        raise ActionError(f"timed out after {limits.timeout:g}s reading {current}")
                encoding = response.encoding or "utf-8"
                status = response.status_code
                break
        else:
            raise ActionError(f"too many redirects (more than {limits.max_redirects}) from {url}")
    if ctype in ("text/html", "application/xhtml+xml"):
        text = to_markdown(body.decode(encoding, errors="replace"))
    elif ctype.startswith("text/") or ctype in ("application/json", "application/xml") or ctype.endswith("+json"):
        text = body.decode(encoding, errors="replace")
    else:
        raise ActionError(f"unsupported content type {ctype or 'unknown'!r} from {current} ({len(body)} bytes)")
    truncated = len(text) > limits.max_chars
    return {"url": current, "status_code": status, "content_type": ctype, "bytes": len(body),
            "hops": hops, "text": text[:limits.max_chars] + ("\n[truncated]" if truncated else "")}


def web_fetch(*, allow: list[str] | tuple[str, ...] = (), limits: WebLimits | None = None,
              requires_approval: bool = False) -> Tool:
    """The ``web_fetch`` tool. ``allow``: hosts or networks exempt from the SSRF block."""
    guard = Guard(allow)
    limits = limits or WebLimits()

    @tool(name="web_fetch", timeout=limits.timeout * (limits.max_redirects + 2), requires_approval=requires_approval)
    def web_fetch_tool(url: str) -> str:
        """Fetch a web page (GET) and return it as readable Markdown text.

        Args:
            url: The http or https URL.
        """
        import httpx

        with recorded("web_browsing", "web_fetch", {"url": url}) as action:
            try:
                page = fetch(url, guard, limits)
            except httpx.HTTPError as exc:
                raise ActionError(f"fetching {url} failed: {type(exc).__name__}: {exc}") from None
            action.output = {k: v for k, v in page.items() if k != "text"} | {"text": page["text"][:5000]}
        return f"URL: {page['url']}\nStatus: {page['status_code']}\nContent-Type: {page['content_type']}\n\n{page['text']}"

    return web_fetch_tool
