"""Running one coroutine per record of a shard, turning LLM failures into rejections."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Sequence, TypeVar

from toolfactory.errors import LLMFailure
from toolfactory.models import Record, Rejected
from toolfactory.stages.base import StageOutput

T = TypeVar("T")


async def map_records(
    stage: str,
    items: Sequence[T],
    work: Callable[[T], Awaitable[list[Record | Rejected]]],
    describe: Callable[[T], tuple[str, dict[str, Any]]],
) -> StageOutput:
    """Run `work` on every item concurrently (the gateway bounds the requests in flight).

    `work` returns records to keep and :class:`Rejected` ones to set aside; an
    :class:`LLMFailure` rejects that item with its reason code. The other items go on.
    """
    out = StageOutput(items_in=len(items))
    results = await asyncio.gather(*(work(item) for item in items), return_exceptions=True)
    for item, result in zip(items, results):
        if isinstance(result, LLMFailure):
            record_id, record = describe(item)
            out.reject(stage, record_id, [result.reason], record, str(result))
            if result.transient:
                out.transient_failures[result.reason] += 1
        elif isinstance(result, BaseException):
            raise result
        else:
            for record in result:
                (out.rejected if isinstance(record, Rejected) else out.records).append(record)  # type: ignore[arg-type]
    return out
