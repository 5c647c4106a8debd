"""The records that flow between stages: tools, tasks, dialogues and verdicts.

One training record is one :class:`Dialogue` (docs/architecture.md §1). Tool parameters are JSON Schema
objects, kept as plain dicts so that any schema keyword survives a round trip through Parquet
(records are stored as JSON text in a column, see :mod:`toolfactory.storage.shards`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

JsonSchema = dict[str, Any]

EMPTY_OBJECT_SCHEMA: JsonSchema = {"type": "object", "properties": {}}


def stable_id(*parts: str) -> str:
    """A short content-derived id, the same on every machine and every run."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
    return digest[:16]


class Record(BaseModel):
    """Base of every stored record; unknown fields are rejected so typos surface early."""

    model_config = ConfigDict(extra="forbid")

    def to_json(self) -> str:
        return self.model_dump_json(exclude_none=True)


class Function(Record):
    """One callable API of a tool, in the OpenAI function shape plus a `returns` schema."""

    name: str
    description: str = ""
    parameters: JsonSchema = Field(default_factory=lambda: dict(EMPTY_OBJECT_SCHEMA))
    returns: JsonSchema = Field(default_factory=lambda: {"type": "object"})
    method: str | None = None
    path: str | None = None

    def openai_tool(self) -> dict[str, Any]:
        """The function in OpenAI's `tools` format."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


class Tool(Record):
    """A tool (an API product) with its functions and where it came from."""

    id: str = ""
    name: str
    description: str = ""
    introduction: str = ""
    link: str = ""
    category: str = "General"
    collections: list[str] = Field(default_factory=list)
    domain_path: list[str] = Field(default_factory=list)
    source: str = "catalog"
    provenance: dict[str, Any] = Field(default_factory=dict)
    functions: list[Function] = Field(default_factory=list)
    openapi: dict[str, Any] | None = None

    def model_post_init(self, __context: Any) -> None:
        if not self.id:
            self.id = stable_id(self.source, self.category, self.name)

    def function(self, name: str) -> Function | None:
        return next((f for f in self.functions if f.name == name), None)


class DomainNode(Record):
    """A node of the API context tree (ToolACE §2.1 speciation): domain → subdomain →
    fine-grained domain → functionality, identified by its path."""

    id: str = ""
    path: list[str]
    description: str = ""
    origin: str = ""  # "document": named by reading a document; "model": generated as a child

    def model_post_init(self, __context: Any) -> None:
        if not self.id:
            self.id = stable_id("domain", *[part.casefold() for part in self.path])


class ToolRef(Record):
    """Which pool tool a dialogue's functions come from (for splits by tool and dataset cards)."""

    id: str
    name: str
    category: str = "General"
    source: str = "catalog"


class BlueprintCall(Record):
    """One ground-truth call of a blueprint: a function and its arguments."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class BlueprintTurn(Record):
    """One user request of a blueprint and the calls that fulfil it."""

    request: str
    calls: list[BlueprintCall]


class Blueprint(Record):
    """A task's ground truth (APIGen-MT): the calls of each user turn, run once on a fresh
    environment when the task was made, and the state they left (the dialogue must reach it).
    Never shown to the assistant."""

    turns: list[BlueprintTurn]
    target_state: dict[str, Any]
    """Per executable source name, the JSON state ``Session.state()`` returned after the calls."""
    repairs: int = 0
    """Times the designer wrote it again after its calls failed (``tasks.blueprints.repairs``)."""


class Task(Record):
    """A sampled tool set with the user instruction to be solved with it."""

    id: str
    tools: list[Tool]
    instruction: str
    relevant_functions: list[str] = Field(default_factory=list)
    scenario: str = "single_tool"
    mode: str = "single"  # the target mode the instruction was written for
    recipe: str = "toolalpaca"
    turns: int = 1  # user turns the dialogue should have
    style: str = ""  # the language style the user agent was asked for (toolace)
    blueprint: Blueprint | None = None  # ground-truth calls and target state (tasks.blueprints)

    def tool_for(self, function_name: str) -> Tool | None:
        """The offered tool a function belongs to."""
        return next((tool for tool in self.tools if tool.function(function_name)), None)


class ToolCall(Record):
    id: str
    name: str
    # Kept as the raw text the model produced: an unparseable argument string is evidence
    # for the verifier, not something to repair silently.
    arguments: str


class Message(Record):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    reasoning: str | None = None  # the assistant's thinking; not part of exported training text
    tool_calls: list[ToolCall] | None = None
    masked: bool | None = None  # a turn whose samples disagreed, kept for a loss mask
    # Why this assistant turn is context only, not to be learned: a reason code of
    # toolfactory.curation.turn_masks (None: learned). Records stored without it read `masked`.
    mask: str | None = None
    tool_call_id: str | None = None
    name: str | None = None


class Dialogue(Record):
    """One training record: system prompt, offered tools, messages and provenance."""

    id: str
    task_id: str
    tools: list[Function]
    messages: list[Message]
    recipe: str = "toolalpaca"
    scenario: str = "single_tool"
    mode: str = "single"  # the mode the messages show (see toolfactory.stages.dialogues.modes)
    target_mode: str | None = None  # the mode the task asked for, when it asked for one
    models: dict[str, str] = Field(default_factory=dict)
    llm_calls: int = 0
    source_tools: list[ToolRef] = Field(default_factory=list)
    # How the dialogue was made: solution search summary (toolllm), compressed responses,
    # clarifications, masked turns.
    generation: dict[str, Any] = Field(default_factory=dict)
    # Set by the curate stage: complexity (ToolACE eq. 1) and its level, API clusters, the
    # diversity subsets the record belongs to.
    curation: dict[str, Any] = Field(default_factory=dict)
    verdicts: list[Verdict] = Field(default_factory=list)
    judgements: list[Judgement] = Field(default_factory=list)


class Verdict(Record):
    """One failed (or passed) check of a record, with a stable reason code."""

    code: str
    passed: bool
    severity: Literal["error", "warning"] = "error"
    message: str = ""
    path: str = ""


class Vote(Record):
    """One judge sample: its decision and why."""

    passes: bool
    reason: str = ""
    thought: str = ""


class Judgement(Record):
    """The majority decision of one judge aspect over its votes (ToolACE §3.2 model layer)."""

    aspect: str
    passes: bool
    votes: list[Vote] = Field(default_factory=list)


class Rejected(Record):
    """A record a stage could not accept, kept with every reason (never silently dropped)."""

    id: str
    stage: str
    reasons: list[str]
    detail: str = ""
    record: dict[str, Any] = Field(default_factory=dict)


Dialogue.model_rebuild()


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: the basis of every content hash."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
