"""The provider's prompt cache: how many of a prompt's tokens an endpoint would not prefill again.

Real endpoints keep the key-value state of the prompts they have processed and skip the prefill
of a prompt's beginning when it is byte-identical to an earlier one's:

* OpenAI caches prompts of 1,024 tokens or more and reports a hit in 128-token steps, from
  1,024 on, in ``usage.prompt_tokens_details.cached_tokens`` (billed at a discount);
* vLLM's automatic prefix caching (and SGLang's radix cache) holds whole blocks of 16 tokens,
  keyed by the hash of the block and of every block before it; the last prompt token is always
  computed, so a prompt seen before is served all but its last block.

The simulator emulates the rule of its profile (``openai`` and ``reasoning``: OpenAI's;
``vllm-hermes`` and ``vllm-no-tool-parser``: vLLM's; ``plain-text``: a server without a prefix
cache, which reports nothing). A prompt's tokens are those of the simulator's own count (one per
four characters, :func:`.text.estimate_tokens`) over the text a chat template renders: the tools
as sent, then every message in order. What the request asks for beyond its prompt (sampling
parameters, the response format) does not enter it, as it does not enter a model's prefill. The
cache knows nothing of who sends the requests; it is a bounded LRU of block hashes per profile.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

CHARS_PER_TOKEN = 4  # the simulator's token estimate (see .text.estimate_tokens)


@dataclass(frozen=True)
class CacheRule:
    """How one family of endpoints caches prompts."""

    block_tokens: int  # a hit is a whole number of these
    min_prompt_tokens: int  # shorter prompts are neither served nor stored
    keeps_last_token: bool  # the last prompt token is computed even when the whole prompt is held


OPENAI = CacheRule(block_tokens=128, min_prompt_tokens=1024, keeps_last_token=False)
VLLM = CacheRule(block_tokens=16, min_prompt_tokens=0, keeps_last_token=True)

RULES: dict[str, CacheRule] = {
    "openai": OPENAI,
    "reasoning": OPENAI,  # an OpenAI reasoning model
    "vllm-hermes": VLLM,
    "vllm-no-tool-parser": VLLM,
}


def rendered_prompt(body: dict[str, Any]) -> str:
    """The prompt text of a chat request as a template lays it out: tools first, then messages.

    Key order and list order are kept as sent: a template renders what it is given, so two
    requests share a prefix only where they are byte-identical."""
    parts: list[str] = []
    tools = body.get("tools")
    if tools:
        parts.append("<tools>" + json.dumps(tools, ensure_ascii=False, separators=(",", ":")) + "</tools>")
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, separators=(",", ":"))
        calls = message.get("tool_calls")
        call_text = json.dumps(calls, ensure_ascii=False, separators=(",", ":")) if calls else ""
        ref = message.get("tool_call_id") or message.get("name") or ""
        parts.append(f"<|{message.get('role')}|{ref}>{text}{call_text}<|end|>")
    return "".join(parts)


def block_keys(text: str, block_tokens: int) -> list[bytes]:
    """The chained hashes of the whole blocks of `text`: block k's key covers blocks 0..k."""
    size = block_tokens * CHARS_PER_TOKEN
    keys: list[bytes] = []
    previous = b""
    for start in range(0, len(text) - size + 1, size):
        previous = hashlib.blake2b(previous + text[start:start + size].encode(), digest_size=12).digest()
        keys.append(previous)
    return keys


class PrefixCache:
    """Block hashes of past prompts, per profile, least recently used dropped first."""

    def __init__(self, max_blocks: int) -> None:
        self.max_blocks = max_blocks
        self._blocks: dict[str, OrderedDict[bytes, None]] = {}
        self.prompt_tokens = 0
        self.cached_tokens = 0

    def lookup(self, profile: str, body: dict[str, Any], prompt_tokens: int) -> tuple[int | None, list[bytes]]:
        """(the cached tokens of the prompt of `body`, whose usage counts `prompt_tokens`; None for
        a profile whose server has no prefix cache) and the keys of its blocks, for :meth:`store`.

        A prompt is held only once its prefill is done (:meth:`store`, when its answer is): a
        request sent while an identical prefix is still in flight is prefilled again, as on a
        real server, so requests fired all at once gain nothing from each other."""
        rule = RULES.get(profile)
        if rule is None:
            return None, []
        if self.max_blocks <= 0 or prompt_tokens < rule.min_prompt_tokens:
            return 0, []
        blocks = self._blocks.setdefault(profile, OrderedDict())
        keys = block_keys(rendered_prompt(body), rule.block_tokens)
        held = 0
        for key in keys:
            if key not in blocks:
                break
            blocks.move_to_end(key)
            held += 1
        servable = prompt_tokens - 1 if rule.keeps_last_token else prompt_tokens
        cached = min(held * rule.block_tokens, servable) // rule.block_tokens * rule.block_tokens
        if cached < rule.min_prompt_tokens:
            cached = 0
        return cached, keys

    def store(self, profile: str, keys: list[bytes], prompt_tokens: int, cached: int) -> None:
        """Hold the blocks of a prompt whose prefill is done (the least recently used go first),
        and count its tokens and the cached ones in the server's totals."""
        self.prompt_tokens += prompt_tokens
        self.cached_tokens += cached
        if not keys:
            return
        blocks = self._blocks.setdefault(profile, OrderedDict())
        for key in keys:
            blocks[key] = None
            blocks.move_to_end(key)
        while len(blocks) > self.max_blocks:
            blocks.popitem(last=False)

    def clear(self) -> None:
        self._blocks.clear()
        self.prompt_tokens = self.cached_tokens = 0
