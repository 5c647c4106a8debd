"""Verifiable tasks as an RL environment reads them: the ``tasks`` export of a run
(:mod:`toolfactory.export.tasks`, one JSON object a line), or a record that names its own
environments (BFCL's multi-turn entries, :func:`task_of_record`).

A :class:`Task` knows the sources its calls run on (:meth:`Task.sources`): the exported
configuration with the initial state put back, and, for an MCP server, the variables that
``env_names`` lists taken from this process's environment. Its ``target_turn_states``, where it
has them, are the states the ground truth leaves after each user turn: BFCL checks the state
after every turn, and a policy that ends where the task does by another path (a file moved a
turn late, a booking changed and then cancelled) must not score as if it had followed it.
Nothing here imports an RL library.
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
    target_turn_states: list[dict[str, Any]] | None = None
    """The state of each source after the calls that answer each user turn, one entry per turn
    (None: a task whose record kept the final state alone is held to that only)."""

    def __post_init__(self) -> None:
        turns = self.target_turn_states
        if turns is None:
            return
        if not isinstance(turns, list) or not all(isinstance(states, dict) for states in turns):
            raise ValueError(f"task {self.id!r}: field 'target_turn_states' must be a list of {{source: state}} objects, "
                             f"not {json.dumps(turns, default=str)[:80]}")
        if len(turns) != len(self.prompt):
            raise ValueError(f"task {self.id!r}: field 'target_turn_states' has {len(turns)} entries, "
                             f"but the prompt has {len(self.prompt)} user turns")

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> Task:
        missing = [f for f in ("id", "prompt", "tools", "environments", "ground_truth", "target_state") if f not in row]
        if missing:
            raise ValueError(f"task {row.get('id')!r}: missing field {missing[0]!r}")
        turns = row.get("target_turn_states")
        return cls(id=str(row["id"]), system=row.get("system"), prompt=list(row["prompt"]), tools=list(row["tools"]),
                   environments=list(row["environments"]), initial_state=dict(row.get("initial_state") or {}),
                   ground_truth=list(row["ground_truth"]), target_state=dict(row["target_state"]),
                   target_turn_states=list(turns) if isinstance(turns, list) else turns)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "system": self.system, "prompt": self.prompt, "tools": self.tools,
                "environments": self.environments, "initial_state": self.initial_state,
                "ground_truth": self.ground_truth, "target_state": self.target_state,
                **({"target_turn_states": self.target_turn_states} if self.target_turn_states is not None else {})}

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
    a preset and its initial state per source), as the ``tasks`` export would write it.

    Its ``target_turn_states`` are the record's own: BFCL's reader keeps the state its ground
    truth leaves after each user turn (``generation.execution.target_turn_states``), else the
    ``turn_states`` the dialogues stage recorded where the record's calls are exactly the ones
    that ran; as in the export, only one entry per user message makes a per-turn target."""
    executed = dialogue.generation.get(EXECUTION) or {}
    own = record_sources(dialogue)
    if not own:
        raise ValueError(f"record {dialogue.id}: generation.execution names no environments")
    recorded = executed.get("calls") or []
    calls = path_calls(dialogue, own)
    errors = [bool(c.get("is_error")) for c in recorded] if len(recorded) == len(calls) else [False] * len(calls)
    prompt = [{"role": "user", "content": m.content} for m in dialogue.messages if m.role == "user"]
    ran_the_path = [(c.get("source"), c.get("name")) for c in recorded] == [(c.source, c.name) for c in calls]
    per_turn = next((found for found in (executed.get("target_turn_states"), executed.get("turn_states") if ran_the_path else None)
                     if isinstance(found, list) and len(found) == len(prompt) and all(isinstance(s, dict) for s in found)), None)
    return Task(
        id=dialogue.id,
        system=next((m.content for m in dialogue.messages if m.role == "system"), None),
        prompt=prompt,
        tools=[f.openai_tool() for f in dialogue.tools],
        environments=[{"name": name, "kind": "python", "env_names": [], "header_names": [],
                       "config": s.model_dump(mode="json", exclude_defaults=True, exclude={"initial_state"}) | {"name": name}}
                      for name, s in own.items()],
        initial_state={name: s.initial_state for name, s in own.items()},  # type: ignore[attr-defined]
        ground_truth=[{"turn": c.turn, "source": c.source, "name": c.name, "arguments": json.loads(c.arguments or "{}"),
                       "is_error": error, "deterministic": c.deterministic} for c, error in zip(calls, errors)],
        target_state=dict(executed.get("target_state") or executed.get("states") or {}),
        target_turn_states=json.loads(json.dumps(per_turn)) if per_turn is not None else None,
    )
