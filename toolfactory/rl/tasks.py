"""Verifiable tasks as an RL environment reads them: the ``tasks`` export of a run
(:mod:`toolfactory.export.tasks`, one JSON object a line), or a record that names its own
environments (BFCL's multi-turn entries, :func:`task_of_record`).

A :class:`Task` knows the sources its calls run on (:meth:`Task.sources`): the exported
configuration with the initial state put back, and, for an MCP server, the variables that
``env_names`` lists taken from this process's environment. Nothing here imports an RL library.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolfactory.config import ToolsConfig
from toolfactory.executable.registry import environments, source_settings
from toolfactory.executable.session import Environment
from toolfactory.executable.settings import ExecutableSourceSettings
from toolfactory.models import Dialogue
from toolfactory.stages.verify.execution import EXECUTION, path_calls, record_sources

SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class Task:
    """One verifiable task (the fields of the ``tasks`` export)."""

    id: str
    system: str | None
    prompt: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    environments: list[dict[str, Any]]
    initial_state: dict[str, Any]
    ground_truth: list[dict[str, Any]]
    target_state: dict[str, Any]

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> Task:
        missing = [f for f in ("id", "prompt", "tools", "environments", "ground_truth", "target_state") if f not in row]
        if missing:
            raise ValueError(f"task {row.get('id')!r}: missing field {missing[0]!r}")
        return cls(id=str(row["id"]), system=row.get("system"), prompt=list(row["prompt"]), tools=list(row["tools"]),
                   environments=list(row["environments"]), initial_state=dict(row.get("initial_state") or {}),
                   ground_truth=list(row["ground_truth"]), target_state=dict(row["target_state"]))

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "system": self.system, "prompt": self.prompt, "tools": self.tools,
                "environments": self.environments, "initial_state": self.initial_state,
                "ground_truth": self.ground_truth, "target_state": self.target_state}

    @property
    def user_turns(self) -> list[str]:
        return [str(m.get("content") or "") for m in self.prompt]

    def tools_config(self) -> ToolsConfig:
        """The sources of the task as a ``tools`` section (see the module doc)."""
        python, mcp = [], []
        for env in self.environments:
            config = dict(env["config"])
            if env.get("kind") == "mcp":
                names = env.get("env_names") or []
                absent = [n for n in names if n not in os.environ]
                if absent:
                    raise ValueError(f"task {self.id}: source {env['name']} needs the environment variable {absent[0]}")
                mcp.append({**config, "env": {n: os.environ[n] for n in names}} if names else config)
            else:
                python.append({**config, "initial_state": self.initial_state.get(env["name"]) or {}})
        return ToolsConfig.model_validate({"environments": python, "mcp": mcp})

    def sources(self) -> dict[str, tuple[Environment, ExecutableSourceSettings]]:
        """Each source of the task by name: what opens its sessions, and its settings."""
        tools = self.tools_config()
        settings = source_settings(tools)
        return {name: (env, settings[name]) for name, env in environments(tools).items()}

    def owners(self) -> dict[str, str]:
        """The source of each function the ground truth calls."""
        return {str(c["name"]): str(c["source"]) for c in self.ground_truth}

    def deterministic(self) -> dict[str, bool]:
        """Whether a replay must give each called function's result again, as the export says."""
        return {str(c["name"]): bool(c.get("deterministic")) for c in self.ground_truth}


def read_tasks(path: str | Path) -> list[Task]:
    """The tasks of a ``tasks`` JSONL file, or of an export folder (its split files in order)."""
    path = Path(path)
    if path.is_dir():
        files = [path / f"{split}.jsonl" for split in SPLITS if (path / f"{split}.jsonl").exists()]
        files += sorted(p for p in path.glob("*.jsonl") if p not in files)
        if not files:
            raise FileNotFoundError(f"{path}: no .jsonl file of tasks in this folder")
    else:
        files = [path]
    return [task for file in files for task in _read_file(file)]


def _read_file(path: Path) -> Iterator[Task]:
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                yield Task.from_json(json.loads(line))
            except (ValueError, TypeError, KeyError) as exc:
                raise ValueError(f"{path}:{n}: {exc}") from exc


def write_tasks(tasks: list[Task], path: str | Path) -> Path:
    path = Path(path)
    path.write_text("".join(json.dumps(t.to_json(), ensure_ascii=False) + "\n" for t in tasks), encoding="utf-8")
    return path


def task_of_record(dialogue: Dialogue) -> Task:
    """The task of a record that names its own environments (BFCL's imported multi-turn entries:
    a preset and its initial state per source), as the ``tasks`` export would write it."""
    executed = dialogue.generation.get(EXECUTION) or {}
    own = record_sources(dialogue)
    if not own:
        raise ValueError(f"record {dialogue.id}: generation.execution names no environments")
    recorded = executed.get("calls") or []
    calls = path_calls(dialogue, own)
    errors = [bool(c.get("is_error")) for c in recorded] if len(recorded) == len(calls) else [False] * len(calls)
    return Task(
        id=dialogue.id,
        system=next((m.content for m in dialogue.messages if m.role == "system"), None),
        prompt=[{"role": "user", "content": m.content} for m in dialogue.messages if m.role == "user"],
        tools=[f.openai_tool() for f in dialogue.tools],
        environments=[{"name": name, "kind": "python", "env_names": [], "header_names": [],
                       "config": s.model_dump(mode="json", exclude_defaults=True, exclude={"initial_state"}) | {"name": name}}
                      for name, s in own.items()],
        initial_state={name: s.initial_state for name, s in own.items()},  # type: ignore[union-attr]
        ground_truth=[{"turn": c.turn, "source": c.source, "name": c.name, "arguments": json.loads(c.arguments or "{}"),
                       "is_error": error, "deterministic": c.deterministic} for c, error in zip(calls, errors)],
        target_state=dict(executed.get("target_state") or executed.get("states") or {}),
    )
