"""Where real HTTP tool calls may go: the allowlist and the settings of the HTTP executor.

Kept apart from :mod:`toolfactory.stages.dialogues.http_executor` so that the config can embed the
settings without importing the stages.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_PORTS = {"http": 80, "https": 443}


class HttpExecutorSettings(BaseModel):
    """Where and how real requests may go; the config's `dialogues.http` mirrors these fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allowlist: list[str] = Field(default_factory=list, description=(
        "Base URLs whose tools are called for real, e.g. https://api.example.com/v1: same scheme, "
        "host and port, and a path under /v1 (not /v10)."))
    timeout_s: float = Field(10.0, gt=0, description="Deadline of one call, DNS resolution included.")
    max_bytes: int = Field(1_000_000, gt=0, description="Larger (decoded) bodies become an error body.")
    allow_private: bool = Field(False, description=(
        "Allow hosts that resolve to private, loopback or link-local addresses (local test servers only)."))
    headers: dict[str, str] = Field(default_factory=dict, description="Static, non-secret headers.")
    headers_from_env: dict[str, str] = Field(default_factory=dict, description=(
        "Header name → NAME of the environment variable holding its value (API keys); the value "
        "is never logged and is redacted from returned bodies."))

    @field_validator("allowlist")
    @classmethod
    def _absolute_urls(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            if url_parts(entry) is None:
                raise ValueError(f"allowlist entry {entry!r} is not an http(s) URL with a host (and no user info)")
        return entries


def url_parts(url: str) -> tuple[str, str, int, str] | None:
    """(scheme, host, port, path) after httpx's normalisation (IDNA, default port, dot segments),
    so that the allowlist compares what will actually be requested."""
    try:
        parts = urlsplit(str(httpx.URL(url)))
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    except (httpx.InvalidURL, ValueError):
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or port is None or parts.username is not None:
        return None
    return parts.scheme, parts.hostname.rstrip("."), port, parts.path or "/"


def allowlisted(url: str, allowlist: Sequence[str]) -> bool:
    """Whether `url` has the scheme, host and port of an allowlist entry and a path under its path."""
    target = url_parts(url)
    if target is None:
        return False
    for entry in allowlist:
        allowed = url_parts(entry)
        if allowed is None or allowed[:3] != target[:3]:
            continue
        prefix = allowed[3].rstrip("/")
        if not prefix or target[3] == prefix or target[3].startswith(prefix + "/"):
            return True
    return False
