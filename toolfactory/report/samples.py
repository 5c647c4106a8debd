"""Examples the run report shows: accepted dialogues as chats, and rejected records with the
rule that rejected them.

A reader trusts numbers more after seeing records: one accepted dialogue per (recipe, mode), its
tool calls and results laid out readably (arguments and JSON results indented), and for each
of the most frequent rejection reasons one record it rejected, with the rule's message and the
path of the fault (ToolACE §3's rule layer writes both; the model layer's judges a reason).
Records are read as stored JSON, so a field a stage adds later is no obstacle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from toolfactory.report.data import RunStats
from toolfactory.storage.shards import read_rejected, stage_parts
from toolfactory.storage import ObjectStore

MAX_TEXT = 1_500  # characters of one message shown; the rest is cut with a mark
TOP_REJECTIONS = 6


@dataclass(frozen=True)
class Turn:
    role: str  # system, user, assistant, tool
    text: str
    calls: tuple[tuple[str, str], ...] = ()  # (function name, arguments as indented JSON)
    name: str = ""  # the function a tool turn answers


@dataclass(frozen=True)
class Chat:
    title: str
    record_id: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class RejectedExample:
    stage: str
    reason: str
    records: int  # how many records the reason rejected in the stage
    record_id: str
    message: str
    path: str


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + f" … ({len(text) - MAX_TEXT:,} more characters)"


def readable(text: str | None) -> str:
    """`text` indented when it is a JSON object or list (arguments, API results), else as it is."""
    if not text:
        return ""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return _cut(text)
    return _cut(json.dumps(value, indent=2, ensure_ascii=False)) if isinstance(value, (dict, list)) else _cut(text)


def chat(record: dict[str, Any]) -> Chat:
    """A stored dialogue as the report's chat (reasoning is the generator's scratch work: left out)."""
    names = {c.get("id"): c.get("name", "") for m in record.get("messages") or [] for c in m.get("tool_calls") or []}
    turns = []
    for message in record.get("messages") or []:
        role = str(message.get("role", ""))
        calls = tuple((str(c.get("name", "")), readable(c.get("arguments"))) for c in message.get("tool_calls") or [])
        name = str(message.get("name") or names.get(message.get("tool_call_id"), "")) if role == "tool" else ""
        text = readable(message.get("content")) if role == "tool" else _cut(str(message.get("content") or ""))
        turns.append(Turn(role, text, calls, name))
    title = f"{record.get('recipe', '?')} · {record.get('mode', '?')}"
    return Chat(title, str(record.get("id", "")), tuple(turns))


def _explained(row: dict[str, Any], reason: str) -> tuple[str, str]:
    """The rule's message and path for `reason` in a rejected row, else its judge's reason or the detail."""
    try:
        record = json.loads(row.get("record") or "{}")
    except ValueError:
        record = {}
    record = record if isinstance(record, dict) else {}
    for verdict in record.get("verdicts") or []:
        if isinstance(verdict, dict) and verdict.get("code") == reason and not verdict.get("passed", False):
            return str(verdict.get("message", "")), str(verdict.get("path", ""))
    for judgement in record.get("judgements") or []:
        if isinstance(judgement, dict) and f"judge_{judgement.get('aspect')}" == reason:
            failing = [v for v in judgement.get("votes") or [] if isinstance(v, dict) and not v.get("passes")]
            return (str(failing[0].get("reason", "")) if failing else str(row.get("detail") or "")), ""
    return str(row.get("detail") or ""), ""


def rejected_examples(store: ObjectStore, run_id: str, stats: RunStats, top: int = TOP_REJECTIONS) -> list[RejectedExample]:
    """One rejected record for each of the `top` most frequent (stage, reason) pairs, read from
    the stages' ``rejected/`` parts until each has its example."""
    ranked = sorted(((n, s.stage, reason) for s in stats.stages for reason, n in s.rejections.items()),
                    key=lambda item: (-item[0], item[1], item[2]))[:top]
    wanted: dict[str, dict[str, int]] = {}
    for n, stage, reason in ranked:
        wanted.setdefault(stage, {})[reason] = n
    found: dict[tuple[str, str], RejectedExample] = {}
    for stage, reasons in wanted.items():
        for path in stage_parts(store, run_id, f"{stage}/rejected"):
            for row in read_rejected(store, path):
                for reason in row.get("reasons") or []:
                    if reason in reasons and (stage, reason) not in found:
                        message, where = _explained(row, reason)
                        found[stage, reason] = RejectedExample(stage, reason, reasons[reason], str(row.get("id", "")), message, where)
            if all((stage, r) in found for r in reasons):
                break
    return [found[stage, reason] for _, stage, reason in ranked if (stage, reason) in found]
