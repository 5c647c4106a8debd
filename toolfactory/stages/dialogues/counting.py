"""What one dialogue costs: its agents' LLM requests, counted where they are sent.

Every agent of a dialogue (user, assistant, tool executor) asks the model through the shard
context's gateway. :func:`counted` gives a dialogue its own view of that context whose gateway
counts each request an agent makes (a :meth:`~toolfactory.llm.LLMGateway.chat` or a
:meth:`~toolfactory.llm.LLMGateway.structured` answer, its re-asks included, as one request);
the dialogue's ``llm_calls`` is that count. No branch of a dialogue adds to it by hand, so a new
branch cannot forget to.

A request that fails is not counted (the dialogue is lost with it); a cached answer is (the
record says what making it took, and the cache is the run's saving, counted by the gateway).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Sequence, cast

from toolfactory.stages.base import ShardContext

if TYPE_CHECKING:
    from toolfactory.llm import LLMGateway


class CountingGateway:
    """An :class:`~toolfactory.llm.LLMGateway` that counts the requests made through it; every
    other attribute is the wrapped gateway's."""

    def __init__(self, gateway: LLMGateway) -> None:
        self.inner = gateway
        self.calls = 0

    async def chat(self, role: str, messages: Sequence[Any], **options: Any) -> Any:
        reply = await self.inner.chat(role, messages, **options)
        self.calls += 1
        return reply

    async def structured(self, role: str, messages: Sequence[Any], schema: dict[str, Any], **options: Any) -> Any:
        answer = await self.inner.structured(role, messages, schema, **options)
        self.calls += 1
        return answer

    async def structured_samples(self, role: str, messages: Sequence[Any], schema: dict[str, Any], *, count: int,
                                 **options: Any) -> list[Any]:
        answers = await self.inner.structured_samples(role, messages, schema, count=count, **options)
        self.calls += count
        return answers

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def counted(ctx: ShardContext) -> tuple[ShardContext, CountingGateway]:
    """`ctx` for one dialogue, whose gateway counts its requests, and that counter."""
    gateway = CountingGateway(ctx.gateway)
    return dataclasses.replace(ctx, gateway=cast("LLMGateway", gateway)), gateway
