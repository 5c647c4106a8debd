"""Runs whose calls really ran, for the exports that keep the environment: dialogues made by
the dialogues stage's execution module (``DialogueExecution``, real runner processes) from
scripted turns, written as a run with its manifest (the sources' configuration) and its pool."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from toolfactory.config import Config, validate_config
from toolfactory.run.manifest import Manifest, write_manifest
from toolfactory.models import Dialogue, Message, Task, Tool, ToolCall, ToolRef
from toolfactory.storage.shards import write_rows
from toolfactory.stages.dialogues.execution import EXECUTION, DialogueExecution
from toolfactory.stages.tools.executable import import_executable
from toolfactory.storage import ObjectStore

from .helpers import RUN, write_run

Turn = tuple[str, list[tuple[str, dict[str, Any]]]]
"""One user message and the calls the assistant answers it with, one call per assistant message."""

# BFCL's file system with a home folder holding one file.
FILES_STATE = {"root": {"alex": {"type": "directory", "contents": {
    "notes.txt": {"type": "file", "content": "budget review on monday"},
    "archive": {"type": "directory", "contents": {}},
}}}}
FILES_TURNS: list[Turn] = [
    ("Make a folder called reports and put a summary.txt in it saying 'Q3 is done'.", [
        ("mkdir", {"dir_name": "reports"}),
        ("cd", {"folder": "reports"}),
        ("touch", {"file_name": "summary.txt"}),
        ("echo", {"content": "Q3 is done", "file_name": "summary.txt"}),
    ]),
    ("Thanks. What is in that folder now?", [("ls", {})]),
    ("Go back up and move notes.txt into the archive.", [
        ("cd", {"folder": ".."}),
        ("mv", {"source": "notes.txt", "destination": "archive"}),
    ]),
]


def config(environments: Sequence[dict[str, Any]] = (), mcp: Sequence[dict[str, Any]] = ()) -> Config:
    return validate_config({"tools": {"environments": list(environments), "mcp": list(mcp)}})


def source_tools(cfg: Config) -> dict[str, Tool]:
    """Each configured source's tool (listed by the tools stage's importer), by source name."""
    names = [s.name for s in (*cfg.tools.environments, *cfg.tools.mcp)]
    found = {}
    for name in names:
        [tool] = asyncio.run(import_executable(name, cfg.tools)).records
        assert isinstance(tool, Tool)
        found[name] = tool
    return found


def executed_dialogue(cfg: Config, tools: Sequence[Tool], turns: Sequence[Turn], record_id: str,
                      unseen: Sequence[tuple[str, dict[str, Any]]] = ()) -> Dialogue:
    """A dialogue whose calls ran on fresh sessions of their sources. `unseen` calls run first
    and are left out of the messages, as the calls of a branch a search abandoned are."""
    task = Task(id=f"task-{record_id}", tools=list(tools), instruction=turns[0][0], turns=len(turns))

    async def run() -> tuple[list[Message], dict[str, Any] | None]:
        messages = [Message(role="system", content="You are a helpful assistant with tools.")]
        async with DialogueExecution(task, cfg.tools) as execution:
            for n, (name, arguments) in enumerate(unseen):
                tool = task.tool_for(name)
                assert tool is not None
                await execution.respond(tool, tool.function(name), ToolCall(id=f"unseen_{n}", name=name, arguments=json.dumps(arguments)))
            for t, (text, calls) in enumerate(turns):
                messages.append(Message(role="user", content=text))
                await execution.user_turn(t)  # as the dialogues stage's drivers say it
                for n, (name, arguments) in enumerate(calls):
                    call = ToolCall(id=f"call_{t}_{n}", name=name, arguments=json.dumps(arguments))
                    tool = task.tool_for(name)
                    assert tool is not None, name
                    result = await execution.respond(tool, tool.function(name), call)
                    messages += [Message(role="assistant", tool_calls=[call]),
                                 Message(role="tool", content=result.content, tool_call_id=call.id, name=name)]
                messages.append(Message(role="assistant", content="Done."))
            return messages, await execution.metadata(messages)

    messages, metadata = asyncio.run(run())
    return Dialogue(
        id=record_id, task_id=task.id, tools=[f for tool in tools for f in tool.functions], messages=messages,
        recipe="apigen", scenario="multi_turn", mode="multiple", models={"assistant": "scripted", "user": "scripted"},
        source_tools=[ToolRef(id=t.id, name=t.name, category=t.category, source=t.source) for t in tools],
        generation={EXECUTION: metadata} if metadata is not None else {},
    )


def write_executed_run(store: ObjectStore, cfg: Config, dialogues: Sequence[Dialogue], tools: Sequence[Tool],
                       run_id: str = RUN) -> None:
    """`dialogues` as an accepted run, with the pool holding `tools` and a manifest holding `cfg`."""
    write_run(store, dialogues, run_id)
    write_rows(store, f"runs/{run_id}/pool/part-00000.parquet", [(t.id, t.to_json()) for t in tools])
    write_manifest(store, Manifest.create(run_id, cfg, {}))
