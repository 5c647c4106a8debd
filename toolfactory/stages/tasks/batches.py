"""Many requests for one tool set, asked of the designer a batch at a time.

Each recipe's task maker asks the designer (the ``user`` role) for ``count`` requests in one
structured answer. An answer grows with ``count`` while the role's ``max_tokens`` does not: a
night that anchors 50 instructions on one executable tool had its answer cut off
(``llm_truncated``) and got no task at all, which a real endpoint with an output limit does too.
So a maker asks for at most :data:`BATCH` requests at once; each later batch's prompt lists the
requests written so far and asks for others, so that no two batches are the same request (the
LLM cache would answer the same prompt with the same requests). A count within one batch sends
the prompt it always sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

#: Requests asked for in one answer at most.
BATCH = 12
#: How the written requests are listed to a later batch (each cut to this many characters).
SHOWN_CHARS = 160

AFTER = """

Requests already written (write {count} others, different from all of these):
{written}"""


async def in_batches(count: int, prompt: Callable[[int], str], ask: Callable[[str, int], Awaitable[list[dict[str, Any]]]],
                     text: Callable[[dict[str, Any]], str]) -> list[dict[str, Any]]:
    """`count` items: `ask(prompt(n), n)` once for n = `count` up to :data:`BATCH`, else batch by
    batch, each later prompt followed by the items so far (`text` of each)."""
    items: list[dict[str, Any]] = []
    while len(items) < count:
        n = min(BATCH, count - len(items))
        asked = prompt(n)
        if items:
            written = "\n".join(f"- {' '.join(text(item).split())[:SHOWN_CHARS]}" for item in items)
            asked += AFTER.format(count=n, written=written)
        got = await ask(asked, n)
        if not got:
            break  # an answer with none: asking again would get none again
        items += got[:n]
    return items
