"""Answer tool calls with real HTTP requests, for tools whose base URL is allowlisted (ToolLLM §2.3).

ToolLLM annotated solution paths against real RapidAPI endpoints; the default executor of this
stage (:func:`toolfactory.stages.dialogues.agents.execute`) has an LLM play the API instead. This
module is the real alternative, and since a tool's URL and the call's arguments come from
documents and model output, every request is treated as untrusted:

* only http/https URLs inside ``allowlist`` (scheme, host, port and a path prefix on a segment
  boundary), checked on the final URL after templating and dot-segment normalisation;
* the host is resolved once and refused if *any* address is private, loopback, link-local,
  multicast, reserved, unspecified or otherwise not global (also when embedded in an IPv4-mapped,
  6to4 or NAT64 IPv6 address), unless ``allow_private``;
* the connection goes to the vetted address itself (see :func:`_exchange` for how), so a DNS
  rebind between the check and the connect cannot reach another address;
* redirects are never followed, the body is read as a stream and given up past ``max_bytes``,
  and the whole call (resolution included) has one deadline, ``timeout_s``;
* header secrets are read from environment variables, never logged, and redacted from every
  body this module returns (an API may echo them).

Nothing here raises for a network problem: every outcome is a response body for the assistant,
``{"status_code": int, "response": ...}`` or ``{"status_code": int, "error": str}``, where
status 0 means no HTTP response was received (refused, unresolvable, timed out, unreachable).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import re
import socket
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence
from urllib.parse import quote, urljoin, urlsplit

import httpx

from toolfactory.errors import ToolfactoryError
from toolfactory.config.allowlist import DEFAULT_PORTS, HttpExecutorSettings, allowlisted
from toolfactory.models import Function, Tool, ToolCall

__all__ = [
    "HttpExecutorSettings",
    "PlanError",
    "PlannedRequest",
    "allowlisted",
    "base_url",
    "call_http",
    "calls_for_real",
    "forbidden_reason",
    "http_client",
    "plan_request",
    "resolve",
]

log = logging.getLogger(__name__)

QUERY_METHODS = frozenset({"GET", "DELETE"})
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
REDACTED = "[redacted]"
_TEMPLATE = re.compile(r"\{([^{}/]+)\}")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class PlanError(ToolfactoryError, ValueError):
    """A call that cannot become a request: the assistant gets it as a 400 error body."""


@dataclass(frozen=True)
class PlannedRequest:
    """What a call turns into before any policy check or network I/O."""

    method: str
    url: str
    params: dict[str, Any] = field(default_factory=dict)
    json: Any = None


class _Unanswered(ToolfactoryError):
    """A call stopped before an HTTP response (refused or unresolvable); the message says why."""


def base_url(tool: Tool) -> str | None:
    """The tool's first OpenAPI server (variables at their defaults), else its `link`."""
    servers = (tool.openapi or {}).get("servers") or []
    url = ""
    if servers and isinstance(servers[0], dict):
        server = servers[0]
        url = str(server.get("url") or "")
        for name, variable in (server.get("variables") or {}).items():
            if isinstance(variable, dict):
                url = url.replace("{" + name + "}", str(variable.get("default", "")))
        if url and not urlsplit(url).scheme:  # a relative server URL is relative to the document
            url = urljoin(tool.link, url) if tool.link else ""
    url = url or tool.link
    parts = urlsplit(url)
    return url if parts.scheme in DEFAULT_PORTS and parts.netloc else None


def _path_value(name: str, value: Any) -> str:
    if value is None or isinstance(value, (dict, list)):
        raise PlanError(f"path parameter {name!r} must be a string or a number")
    text = quote(json.dumps(value) if isinstance(value, bool) else str(value), safe="")
    # "." and ".." would be removed as dot segments and move the request to another path.
    if text in ("", ".", ".."):
        raise PlanError(f"path parameter {name!r} may not be {value!r}")
    return text


def _query_value(value: Any) -> Any:
    if isinstance(value, dict):
        return json.dumps(value)
    if isinstance(value, list):
        return [json.dumps(v) if isinstance(v, (dict, list)) else v for v in value]
    return value


def plan_request(tool: Tool, function: Function, arguments: Mapping[str, Any]) -> PlannedRequest:
    """The request for a call: `{name}` path templates filled from the arguments (URL-quoted),
    the other arguments as query parameters (GET, DELETE) or a JSON body (POST, PUT, PATCH).

    A function without a method is called with GET; a `path` that is a full URL (ToolBench
    stores RapidAPI URLs that way) is used as it is, otherwise it is appended to the base URL.
    """
    method = (function.method or "GET").upper()
    if method not in QUERY_METHODS | BODY_METHODS:
        raise PlanError(f"method {method} is not supported (only {', '.join(sorted(QUERY_METHODS | BODY_METHODS))})")
    path = function.path or ""
    if urlsplit(path).scheme:
        template = path
    else:
        base = base_url(tool)
        if base is None:
            raise PlanError(f"tool {tool.name!r} has no http(s) base URL")
        template = base.rstrip("/") + "/" + path.lstrip("/") if path else base
    used: set[str] = set()

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in arguments:
            raise PlanError(f"missing path parameter {name!r}")
        used.add(name)
        return _path_value(name, arguments[name])

    url = _TEMPLATE.sub(substitute, template)
    rest = {k: v for k, v in arguments.items() if k not in used}
    if method in QUERY_METHODS:
        return PlannedRequest(method, url, params={k: _query_value(v) for k, v in rest.items() if v is not None})
    return PlannedRequest(method, url, json=rest)



def calls_for_real(tool: Tool, function: Function, settings: HttpExecutorSettings) -> bool:
    """Whether calls to `function` go to the real API (its URL is allowlisted) rather than the LLM."""
    path = function.path or ""
    url = path if urlsplit(path).scheme else base_url(tool)
    return url is not None and allowlisted(url, settings.allowlist)


def forbidden_reason(address: str) -> str | None:
    """Why a resolved address may not be connected to by default ("loopback", …), or None.

    IPv4 embedded in IPv6 (IPv4-mapped, 6to4, NAT64) is checked as well: such an address leads
    to the embedded IPv4 host.
    """
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone (fe80::1%eth0)
    candidates: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = [ip.ipv4_mapped, ip.sixtofour]
        if ip in _NAT64:
            embedded.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
        candidates = [v4 for v4 in embedded if v4 is not None] + candidates
    for candidate in candidates:
        for reason in ("loopback", "link_local", "unspecified", "multicast", "reserved", "private"):
            if getattr(candidate, f"is_{reason}"):
                return reason.replace("_", "-")
        if not candidate.is_global:
            return "non-global"
    return None


async def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to, in the resolver's order (IP literals resolve to themselves)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


async def _vetted_addresses(host: str, port: int, allow_private: bool) -> list[str]:
    try:
        addresses = await resolve(host, port)
    except OSError as exc:  # socket.gaierror and friends
        raise _Unanswered(f"cannot resolve {host}: {exc.strerror or exc}") from None
    if not addresses:
        raise _Unanswered(f"{host} resolves to no address")
    if not allow_private:
        for address in addresses:
            reason = forbidden_reason(address)
            if reason is not None:
                raise _Unanswered(f"{host} resolves to {address}, a {reason} address: refused "
                                  "(set allow_private only for local test servers)")
    return addresses


def http_client() -> httpx.AsyncClient:
    """A client fit for :func:`call_http`.

    `trust_env=False`: a proxy from HTTP(S)_PROXY would resolve the host itself and defeat the
    address pinning. Connections are pooled per (scheme, address, port).
    """
    return httpx.AsyncClient(trust_env=False, follow_redirects=False)


def _secret_headers(settings: HttpExecutorSettings) -> dict[str, str]:
    headers = {}
    for header, variable in settings.headers_from_env.items():
        value = os.environ.get(variable, "")
        if not value:
            raise _Unanswered(f"environment variable {variable} (for header {header}) is not set")
        headers[header] = value
    return headers


def _redact(value: Any, secrets: Sequence[str]) -> Any:
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, list):
        return [_redact(v, secrets) for v in value]
    if isinstance(value, dict):
        return {_redact(k, secrets): _redact(v, secrets) for k, v in value.items()}
    return value


async def _read_capped(response: httpx.Response, max_bytes: int) -> bytes | None:
    """The decoded body, or None as soon as it is known to exceed `max_bytes`."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        return None
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > max_bytes:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _decode(content: bytes, charset: str | None) -> Any:
    try:
        text = content.decode(charset or "utf-8", errors="replace")
    except LookupError:  # an unknown charset name
        text = content.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


async def _exchange(client: httpx.AsyncClient, planned: PlannedRequest, url: httpx.URL, address: str,
                    headers: dict[str, str], settings: HttpExecutorSettings) -> dict[str, Any]:
    """One request to `address`, standing in for `url`'s host.

    Pinning: the request URL carries the vetted IP, so httpx opens the TCP connection to it and
    never resolves the name again; the `Host` header carries the real host (virtual hosting), and
    the `sni_hostname` extension makes httpcore send the real host as TLS SNI and verify the
    certificate against it (`ssl` checks `server_hostname`). It uses only public httpx API.
    """
    pinned = url.copy_with(host=address.split("%", 1)[0])
    request = client.build_request(
        planned.method, pinned, params=planned.params or None,
        json=planned.json if planned.method in BODY_METHODS else None,
        headers={**settings.headers, **headers, "Host": url.netloc.decode("ascii")},
        extensions={"sni_hostname": url.raw_host.decode("ascii")}, timeout=settings.timeout_s,
    )
    response = await client.send(request, stream=True, follow_redirects=False)
    try:
        status = response.status_code
        log.info("http call %s %s://%s%s -> %d", planned.method, url.scheme, url.host, url.path, status)
        if 300 <= status < 400:
            location = response.headers.get("location", "")
            target = urljoin(str(url), location)
            where = ""
            if location:
                where = f" (to {httpx.URL(target).host})" if allowlisted(target, settings.allowlist) \
                    else " (to a location outside the allowlist)"
            return {"status_code": status, "error": f"redirects are not followed{where}"}
        content = await _read_capped(response, settings.max_bytes)
        if content is None:
            return {"status_code": status, "error": f"response body exceeds max_bytes ({settings.max_bytes}); not read"}
        body = _decode(content, response.charset_encoding)
        if status >= 400:
            text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
            return {"status_code": status, "error": text.strip() or response.reason_phrase}
        return {"status_code": status, "response": body}
    finally:
        await response.aclose()


async def _send(planned: PlannedRequest, settings: HttpExecutorSettings, headers: dict[str, str],
                client: httpx.AsyncClient | None) -> dict[str, Any]:
    if not allowlisted(planned.url, settings.allowlist):
        raise _Unanswered(f"{urlsplit(planned.url).hostname or planned.url} is not in the allowlist "
                          "(or the URL leaves the allowlisted path)")
    url = httpx.URL(planned.url)
    host = url.raw_host.decode("ascii")
    addresses = await _vetted_addresses(host, url.port or DEFAULT_PORTS[url.scheme], settings.allow_private)
    own = client is None
    client = client or http_client()
    try:
        for address in addresses[:-1]:
            try:
                return await _exchange(client, planned, url, address, headers, settings)
            except httpx.ConnectError:  # an unreachable address (say IPv6 without a route): the next one
                continue
        return await _exchange(client, planned, url, addresses[-1], headers, settings)
    finally:
        if own:
            await client.aclose()


async def call_http(tool: Tool, function: Function, call: ToolCall, settings: HttpExecutorSettings,
                    client: httpx.AsyncClient | None = None) -> dict[str, Any]:
    """The body the assistant sees for `call`, answered by the real API; never raises for the
    network. Without `client`, a fresh :func:`http_client` is used for this one call."""
    try:
        arguments = json.loads(call.arguments or "{}")
    except json.JSONDecodeError as exc:
        return {"status_code": 400, "error": f"arguments are not valid JSON: {exc.msg}"}
    if not isinstance(arguments, dict):
        return {"status_code": 400, "error": "arguments must be a JSON object"}
    try:
        planned = plan_request(tool, function, arguments)
    except PlanError as exc:
        return {"status_code": 400, "error": str(exc)}
    secrets: list[str] = []
    try:
        headers = _secret_headers(settings)
        secrets = list(headers.values())
        async with asyncio.timeout(settings.timeout_s):
            body = await _send(planned, settings, headers, client)
    except _Unanswered as exc:
        log.warning("http call %s %s refused: %s", planned.method, planned.url, exc)
        body = {"status_code": 0, "error": str(exc)}
    except (TimeoutError, httpx.TimeoutException):
        body = {"status_code": 0, "error": f"no response within {settings.timeout_s:g} s"}
    except httpx.HTTPError as exc:
        body = {"status_code": 0, "error": f"request failed: {type(exc).__name__}: {exc}"}
    return _redact(body, secrets)
