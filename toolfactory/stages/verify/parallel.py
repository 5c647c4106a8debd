"""`toolfactory verify --workers N`: a JSONL file checked on N processes, streaming in and out.

The file is read in chunks of lines; each worker process parses, converts and checks a whole
chunk (the reader's own per-record functions, so a record gets the same verdicts as when read
serially), and returns plain outcomes. The parent writes them in input order as they arrive,
with at most two chunks per worker in flight, so memory stays bounded for any file size. Formats
whose records are JSONL lines (``openai``, ``sharegpt``, ``xlam``) are split; any other input is checked in one
process (:func:`splittable`).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Union

from toolfactory.formats import openai, sharegpt, xlam
from toolfactory.formats.base import FormatError, converted, file_text, parsed_line
from toolfactory.stages.verify.export_policy import ExportPolicy
from toolfactory.models import Dialogue, Verdict
from toolfactory.stages.verify.execution import ExecutionLayer, self_contained
from toolfactory.stages.verify.limits import Limits
from toolfactory.stages.verify.policy import Policy
from toolfactory.stages.verify.rules import check, errors

CHUNK = 250  # lines per task: sending one costs little next to checking it, and the last ones end close together
LINE_READERS: dict[str, Callable[[Any], Dialogue]] = {"openai": openai.to_dialogue, "sharegpt": sharegpt.to_dialogue,
                                                      "xlam": xlam.to_dialogue}



class Found(NamedTuple):
    """A failed verdict as the report needs it (a tuple: cheap to send between processes)."""

    code: str
    path: str
    message: str


# A record that could not be read, or (id, rejecting findings, warnings, the name of the policy
# applied or None) of a checked one.
Outcome = Union[FormatError, tuple[str, list[Found], list[Found], Union[str, None]]]
# The policy of every record, or of each one (an export's: what the factory applied to it).
Policies = Union[Policy, ExportPolicy, None]


def _found(verdicts: Iterable[Verdict]) -> list[Found]:
    return [Found(v.code, v.path, v.message) for v in verdicts]


# The execution layer of a serial verify (`toolfactory verify`, from the record or --live), given a
# record the rules passed and its policy; None: replay the records that name their environments.
Execution = Callable[[Dialogue, Union[Policy, None]], list[Verdict]]


def judged(item: Dialogue | FormatError, skipped: frozenset[str], limits: Limits, policies: Policies,
           execution: Execution | None = None) -> Outcome:
    if isinstance(item, FormatError):
        return item
    if isinstance(policies, ExportPolicy):  # as the factory judged this record, in the form the export gives it
        judging = policies.of(item)
        policy = judging.policy if judging is not None else None
        skipped = skipped | judging.not_applicable if judging is not None else skipped
    else:
        policy = policies
    verdicts = check(item, skipped, limits, policy)
    if not errors(verdicts) and execution is not None:  # the execution layer, on what the rules passed
        verdicts += execution(item, policy)
    elif not errors(verdicts) and self_contained(item):
        verdicts += asyncio.run(ExecutionLayer({}, skipped).verdicts(item, policy))
    return (item.id, _found(errors(verdicts)), _found(v for v in verdicts if v.severity == "warning"),
            None if policy is None else policy.name)


def splittable(path: Path, fmt: str) -> bool:
    """Whether `path` is a JSONL file of a line format (its first line is a JSON object)."""
    if fmt not in LINE_READERS or not path.is_file():
        return False
    try:
        with path.open("rb") as handle:
            first = next((line for line in handle if line.strip()), b"")
        return isinstance(json.loads(file_text(first)), dict)
    except (OSError, ValueError, RecursionError):  # not UTF-8, not JSON, an integer Python refuses
        return False  # the serial reader reports what is wrong with the file


def _chunks(path: Path) -> Iterator[list[tuple[int, int, bytes]]]:
    # Bytes: each line is decoded by its worker, so a line that is not UTF-8 is that record's error.
    chunk: list[tuple[int, int, bytes]] = []
    index = 0
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            chunk.append((index, number, line))
            index += 1
            if len(chunk) == CHUNK:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


# A worker's policies, given once when it starts (an export's can name every record: sent with
# each chunk, it would cost more than the chunk).
_policies: Policies = None


def _start_worker(policies: Policies) -> None:
    global _policies
    _policies = policies


def _judge_chunk(fmt: str, chunk: list[tuple[int, int, bytes]], skipped: frozenset[str], limits: Limits) -> list[Outcome]:
    to_dialogue = LINE_READERS[fmt]
    return [judged(converted(index, f"line {number}", parsed_line(index, number, line), to_dialogue), skipped, limits, _policies)
            for index, number, line in chunk]


def parallel_outcomes(path: Path, fmt: str, workers: int, skipped: frozenset[str], limits: Limits,
                      policies: Policies) -> Iterator[Outcome]:
    """The outcome of every record of `path`, in input order, checked on `workers` processes."""
    # fork: workers inherit the imported library and its compiled-schema caches at no cost.
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"), initializer=_start_worker,
                             initargs=(policies,)) as pool:
        pending: deque[Future[list[Outcome]]] = deque()
        for chunk in _chunks(path):
            pending.append(pool.submit(_judge_chunk, fmt, chunk, skipped, limits))
            if len(pending) >= 2 * workers:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()


def outcomes(items: Iterable[Dialogue | FormatError], skipped: frozenset[str], limits: Limits,
             policies: Policies, execution: Execution | None = None) -> Iterator[Outcome]:
    """The outcome of every record read serially."""
    return (judged(item, skipped, limits, policies, execution) for item in items)
