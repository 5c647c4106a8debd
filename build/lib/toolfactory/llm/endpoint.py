"""Where the gateway sends requests, and the API key it sends them with.

The key is resolved on the worker that makes the requests, from a Prefect Secret block or an
environment variable named in the config; it is never stored in a config, manifest or shard.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from toolfactory.config import LLMConfig
from toolfactory.errors import ConfigError


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    api_key: str = field(repr=False)


def resolve_api_key(llm: LLMConfig) -> str:
    if llm.api_key_secret_block:
        from prefect.blocks.system import Secret  # adapter: only needed for this option

        try:
            return str(Secret.load(llm.api_key_secret_block).get())
        except ValueError as exc:
            raise ConfigError(
                f"llm.api_key_secret_block: no Prefect Secret block {llm.api_key_secret_block!r}"
            ) from exc
    # OpenAI-compatible servers that need no key (vLLM, SGLang, the simulator) accept any value.
    return os.environ.get(llm.api_key_env, "EMPTY")


def resolve_endpoint(llm: LLMConfig, base_url: str | None) -> Endpoint:
    url = base_url or llm.base_url
    if not url:
        raise ConfigError("llm.base_url: no endpoint to send requests to")
    return Endpoint(base_url=url, api_key=resolve_api_key(llm))
