"""Requests that share a prompt's beginning: the first goes alone, the others once it is answered.

An endpoint serves a prompt's beginning from its cache when an earlier prompt began with the same
bytes and that earlier prompt's prefill is done: OpenAI from 1,024 tokens on (billed at a
discount), vLLM's prefix caching and SGLang's radix cache for any whole block. Requests sent
together find nothing held, since none of them is answered yet. The factory sends many such
groups at once: the votes of a judge over one dialogue, the judges of dialogues written for one
tool set, the self-consistency samples of a turn, the first turns of dialogues that share their
tools and system prompt.

:class:`SharedPrefixes` holds a request back while another request in flight shares a longer
beginning with it (at least `min_tokens`) than any answered request does, until that one is
answered; then it goes, with every other request that waited for it. The first of a group thus
pays for the shared beginning, and the rest find it cached. A request that shares nothing, or
whose shared beginning is already held, goes at once. Only the order of sending changes, never a
request or its answer.

A prompt is read as its tools, then its messages, as sent (the order a chat template renders
them), in blocks of 512 characters (about 128 tokens). Block k is known by a hash chained over
blocks 0..k, so two prompts share k blocks exactly when their first k blocks are equal. What was
answered is remembered for `held_s` seconds (OpenAI keeps a prefix for 5 to 10 minutes of
inactivity): after that, waiting for another request is worth it again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

BLOCK_CHARS = 512  # about 128 tokens at 4 characters a token: OpenAI's caching step
CHARS_PER_TOKEN = 4
HELD_S = 300.0
MAX_HELD_BLOCKS = 1 << 18


def prompt_blocks(request: dict[str, Any]) -> list[bytes]:
    """The chained hashes of the whole blocks of `request`'s prompt: its tools, then its messages."""
    parts = [json.dumps(request.get("tools") or [], ensure_ascii=False, separators=(",", ":"))]
    parts += [json.dumps(m, ensure_ascii=False, separators=(",", ":")) for m in request.get("messages") or []]
    text = "\n".join(parts)
    keys: list[bytes] = []
    chain = b""
    for start in range(0, len(text) - BLOCK_CHARS + 1, BLOCK_CHARS):
        chain = hashlib.blake2b(chain + text[start:start + BLOCK_CHARS].encode(), digest_size=16).digest()
        keys.append(chain)
    return keys


class SharedPrefixes:
    """The prompt beginnings of one gateway's requests: those in flight, and those answered."""

    def __init__(self, min_tokens: int, held_s: float = HELD_S, max_held_blocks: int = MAX_HELD_BLOCKS) -> None:
        self.min_blocks = -(-min_tokens * CHARS_PER_TOKEN // BLOCK_CHARS) if min_tokens > 0 else 0
        self.held_s = held_s
        self.max_held_blocks = max_held_blocks
        self._in_flight: dict[bytes, asyncio.Event] = {}  # block -> the answer of the first request holding it
        self._held: OrderedDict[bytes, float] = OrderedDict()  # block -> when a request holding it was answered
        self.waits = 0  # requests that waited for another's answer

    @asynccontextmanager
    async def turn(self, request: dict[str, Any]) -> AsyncIterator[None]:
        """Wait while a request in flight shares more of `request`'s beginning than the endpoint
        holds; then send (the body of the `async with`), and let the requests waiting for this
        one go once it is answered (or has failed)."""
        blocks = prompt_blocks(request) if self.min_blocks else []
        if len(blocks) < self.min_blocks or not blocks:
            yield  # too short to be cached, or to serve another request: nothing to wait for or hold
            return
        while (leader := self._leader(blocks)) is not None:
            self.waits += 1
            await leader.wait()
        answered = asyncio.Event()
        mine = [block for block in blocks if block not in self._in_flight]
        for block in mine:
            self._in_flight[block] = answered
        ok = False
        try:
            yield
            ok = True
        finally:
            for block in mine:
                del self._in_flight[block]
            if ok:
                self._hold(blocks)
            answered.set()

    def _leader(self, blocks: list[bytes]) -> asyncio.Event | None:
        """The answer to wait for: that of the request in flight sharing the longest beginning with
        `blocks`, when it is at least `min_blocks` long and longer than any held one."""
        now = time.monotonic()
        for k in range(len(blocks) - 1, self.min_blocks - 2, -1):
            held = self._held.get(blocks[k])
            if held is not None and now - held < self.held_s:
                return None
            leader = self._in_flight.get(blocks[k])
            if leader is not None:
                return leader
        return None

    def _hold(self, blocks: list[bytes]) -> None:
        now = time.monotonic()
        for block in blocks:
            self._held[block] = now
            self._held.move_to_end(block)
        while len(self._held) > self.max_held_blocks:
            self._held.popitem(last=False)
