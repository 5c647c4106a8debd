"""Format generalization in the openai export (ToolACE §2.2.2): calls written as text in a
declared format, tools described in the system prompt, and read back to the same calls."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from toolfactory.export import ExportOptions, export_run
from toolfactory.export.base import ExportError
from toolfactory.models import Dialogue, Message
from toolfactory.render import parse_dialogue

from .helpers import RUN, by_id, read_jsonl

DECLARED = re.compile(r"Function call format:\s*(\w+)")


def exported(run_store, tmp_path: Path, **options: str) -> list[dict]:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    summary = export_run(run_store, RUN, "openai", out, options=ExportOptions(**options))
    assert summary["exported"] + sum(summary["skipped"].values()) == summary["records"]
    return [line for split in ("train", "validation", "test") for line in read_jsonl(out / f"{split}.jsonl")]


def calls_of(messages: list[Message]) -> list[tuple[str, object]]:
    return [(c.name, json.loads(c.arguments or "{}")) for m in messages for c in m.tool_calls or []]


@pytest.mark.parametrize("call_format,tool_format", [("python", "yaml"), ("react", "markdown"), ("xml", "xml"), ("json", "json")])
def test_a_text_call_format_round_trips_to_the_same_calls(run_store, dialogues: list[Dialogue], tmp_path: Path,  # type: ignore[no-untyped-def]
                                                          call_format: str, tool_format: str) -> None:
    lines = exported(run_store, tmp_path, call_format=call_format, tool_format=tool_format)
    assert lines and all(set(line) == {"messages"} for line in lines)
    originals = list(by_id(dialogues).values())
    matched = 0
    for line in lines:
        messages = [Message.model_validate({k: v for k, v in m.items() if k in Message.model_fields}) for m in line["messages"]]
        assert DECLARED.search(messages[0].content or "").group(1) == call_format
        assert not any(m.tool_calls for m in messages)  # calls are text now
        parsed = parse_dialogue(messages, tool_format, call_format)
        same = [d for d in originals if calls_of(d.messages) == calls_of(parsed.messages) and
                [m.content for m in d.messages if m.role == "user"] == [m.content for m in parsed.messages if m.role == "user"]]
        matched += bool(same)
    assert matched == len(lines)


def test_mixed_formats_vary_per_record_and_are_stable(run_store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    first = exported(run_store, tmp_path, call_format="mixed", tool_format="mixed")
    again = exported(run_store, tmp_path, call_format="mixed", tool_format="mixed")
    assert first == again
    formats = Counter(DECLARED.search(line["messages"][0]["content"]).group(1) if "tools" not in line else "openai" for line in first)
    assert len(formats) >= 4


def test_unknown_formats_are_refused_before_any_work() -> None:
    with pytest.raises(ExportError, match="unknown call format 'yaml'"):
        ExportOptions(call_format="yaml")
    with pytest.raises(ExportError, match="unknown tool format 'csv'"):
        ExportOptions(tool_format="csv")


def test_a_curation_subset_exports_only_its_records(tmp_path: Path, dialogues: list[Dialogue]) -> None:
    from .helpers import open_store, write_run

    levels = ["easy", "medium", "hard"]
    curated = [d.model_copy(update={"curation": {"complexity_level": levels[i % 3], "diversity": ["low"] if i % 2 else []}})
               for i, d in enumerate(dialogues)]
    store = open_store(tmp_path / "store")
    write_run(store, curated)
    summary = export_run(store, RUN, "openai", tmp_path / "hard", options=ExportOptions(subset="complexity=hard"))
    assert summary["exported"] == sum(d.curation["complexity_level"] == "hard" for d in curated)
    assert summary["skipped"]["not_in_subset"] == len(curated) - summary["exported"]
    low = export_run(store, RUN, "openai", tmp_path / "low", options=ExportOptions(subset="diversity=low"))
    assert low["exported"] == len(curated) // 2
    with pytest.raises(ExportError, match="unknown subset"):
        ExportOptions(subset="complexity=extreme")
