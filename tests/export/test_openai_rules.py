"""The OpenAI export checked against OpenAI's fine-tuning format rules (the chat fine-tuning data
checks of OpenAI's cookbook, extended with its function-calling guide), re-implemented here, and
the Finish convention: a ToolLLM path offers Finish as a tool and ends with its call."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from toolfactory.export import SPLITS, export_run
from toolfactory.models import Dialogue, Message
from toolfactory.stages.dialogues.search import SYSTEM_PROMPT

from .helpers import RUN, final_answer, open_store, read_jsonl, write_run

ROLES = {"system", "user", "assistant", "tool"}
MESSAGE_KEYS = {"role", "content", "name", "tool_calls", "tool_call_id", "weight", "function_call"}
FUNCTION_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def format_errors(example: dict[str, Any]) -> list[str]:
    """The problems OpenAI's checks find in one training example (empty when it passes)."""
    errors: list[str] = []
    if set(example) - {"messages", "tools", "parallel_tool_calls"}:
        errors.append(f"unrecognized keys {set(example) - {'messages', 'tools', 'parallel_tool_calls'}}")
    messages = example.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*errors, "missing messages list"]
    names = set()
    for tool in example.get("tools") or []:
        if tool.get("type") != "function" or not FUNCTION_NAME.match(tool["function"].get("name", "")):
            errors.append(f"bad tool {tool}")
        names.add(tool["function"]["name"])
    called: set[str] = set()
    for n, message in enumerate(messages):
        if set(message) - MESSAGE_KEYS:
            errors.append(f"messages[{n}]: unrecognized keys {set(message) - MESSAGE_KEYS}")
        if message.get("role") not in ROLES:
            errors.append(f"messages[{n}]: role {message.get('role')!r}")
        content = message.get("content")
        if not (isinstance(content, str) or (content is None and message.get("tool_calls"))):
            errors.append(f"messages[{n}]: missing content")
        if "weight" in message and (message["role"] != "assistant" or message["weight"] not in (0, 1)):
            errors.append(f"messages[{n}]: weight")
        for call in message.get("tool_calls") or []:
            called.add(call["id"])
            if call["function"]["name"] not in names:
                errors.append(f"messages[{n}]: calls {call['function']['name']!r}, which is not in tools")
            if not isinstance(call["function"]["arguments"], str):
                errors.append(f"messages[{n}]: arguments are not a string")
        if message.get("role") == "tool" and message.get("tool_call_id") not in called:
            errors.append(f"messages[{n}]: answers no earlier call")
    if not any(m.get("role") == "assistant" for m in messages):
        errors.append("no assistant message")
    return errors


def searched(dialogue: Dialogue) -> Dialogue:
    """`dialogue` as a ToolLLM search leaves it: A.8's system prompt (which asks for Finish), a plain
    final answer, the search summary in `generation`, no Finish among its tools."""
    body = [m for m in dialogue.messages if m.role != "system"]
    return dialogue.model_copy(update={
        "id": "searched", "recipe": "toolllm",
        "messages": [Message(role="system", content=SYSTEM_PROMPT.format(task_description="tools")), *body],
        "generation": {"search": {"method": "dfsdt", "finish_type": "give_answer"}}})


def test_every_exported_line_passes_openai_format_checks(tmp_path: Path, dialogues: list[Dialogue]) -> None:
    plain = next(d for d in dialogues if d.id.endswith("-sequential"))
    store = open_store(tmp_path / "store")
    write_run(store, [*dialogues, searched(plain)])
    summary = export_run(store, RUN, "openai", tmp_path / "out")
    lines = [row for s in SPLITS for row in read_jsonl(tmp_path / "out" / f"{s}.jsonl")]
    assert len(lines) == summary["exported"] == len(dialogues) + 1
    assert [format_errors(line) for line in lines if format_errors(line)] == []


def test_a_toolllm_path_offers_finish_and_ends_with_its_call(tmp_path: Path, dialogues: list[Dialogue]) -> None:
    plain = next(d for d in dialogues if d.id.endswith("-sequential"))
    store = open_store(tmp_path / "store")
    write_run(store, [searched(plain)])
    export_run(store, RUN, "openai", tmp_path / "out")
    (line,) = [row for s in SPLITS for row in read_jsonl(tmp_path / "out" / f"{s}.jsonl")]
    assert "Finish" in line["messages"][0]["content"]
    assert "Finish" in [t["function"]["name"] for t in line["tools"]]
    last = line["messages"][-1]
    assert last["role"] == "assistant" and [c["function"]["name"] for c in last["tool_calls"]] == ["Finish"]
    assert json.loads(last["tool_calls"][0]["function"]["arguments"]) == {"return_type": "give_answer", "final_answer": final_answer(plain)}
    # the answer is given once, by Finish: no assistant text repeats it
    assert all(m.get("content") != final_answer(plain) for m in line["messages"])


def test_a_dialogue_outside_the_convention_is_written_without_finish(tmp_path: Path, dialogues: list[Dialogue]) -> None:
    plain = next(d for d in dialogues if d.id.endswith("-sequential"))
    store = open_store(tmp_path / "store")
    write_run(store, [plain])
    export_run(store, RUN, "openai", tmp_path / "out")
    (line,) = [row for s in SPLITS for row in read_jsonl(tmp_path / "out" / f"{s}.jsonl")]
    assert "Finish" not in [t["function"]["name"] for t in line["tools"]]
    assert line["messages"][-1] == {"role": "assistant", "content": final_answer(plain)}
