"""Records for the export tests: the verifier's valid corpus with its source tools recorded, a
larger tool pool for the split tests, the papers' real data read by the repo's readers, and a
run written as verify shards into a local object store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Sequence

from toolfactory.catalog import load_seed_catalog
from toolfactory.config import StorageConfig
from toolfactory.formats import toolalpaca, toolbench
from toolfactory.models import Dialogue, Function, Tool, ToolRef
from toolfactory.storage.shards import write_rows
from benchmarks.corpus import valid_dialogues
from toolfactory.storage import ObjectStore

RUN = "run-export"


def pool(copies: int) -> list[Tool]:
    """`copies` renamed copies of the seed catalog: distinct tool ids, function names and
    categories (``<category>-<k>``), so that splits have many tools and categories to assign."""
    tools = []
    for k in range(copies):
        for tool in load_seed_catalog():
            if not tool.functions:
                continue
            functions = [f.model_copy(update={"name": f"{f.name}_{k}"}) for f in tool.functions]
            tools.append(Tool(name=f"{tool.name}{k}", description=tool.description, category=f"{tool.category}-{k}",
                              source="catalog", functions=functions))
    return tools


def with_sources(dialogues: Iterable[Dialogue], tools: Sequence[Tool]) -> list[Dialogue]:
    """The dialogues with `source_tools` set, as the dialogues stage sets them: the pool tools
    whose functions a dialogue offers (function names are unique across `tools`)."""
    owner = {f.name: t for t in tools for f in t.functions}
    out = []
    for dialogue in dialogues:
        found = {owner[f.name].id: owner[f.name] for f in dialogue.tools if f.name in owner}
        refs = [ToolRef(id=t.id, name=t.name, category=t.category, source=t.source) for t in found.values()]
        out.append(dialogue.model_copy(update={"source_tools": refs, "models": {"assistant": "sim-assistant", "user": "sim-user"}}))
    return out


def corpus(count: int, seed: int = 0, copies: int = 1) -> list[Dialogue]:
    tools = pool(copies)
    return with_sources(valid_dialogues(count, seed, tools=tools), tools)


# A function whose arguments nest deeper than the seed catalog's: objects in objects, an array
# of objects that hold an object, arrays of enum values, optional properties with defaults.
SHIPMENT = Function(
    name="book_shipment",
    description="Book a parcel shipment from a sender to a recipient.",
    parameters={
        "type": "object",
        "properties": {
            "sender": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "address": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}, "postcode": {"type": "string"}},
                        "required": ["city"],
                    },
                    "phone": {"type": "string"},
                },
                "required": ["name", "address"],
            },
            "parcels": {
                "type": "array",
                "minItems": 1,
                "maxItems": 3,
                "items": {
                    "type": "object",
                    "properties": {
                        "weight_kg": {"type": "number", "minimum": 0.1, "maximum": 30},
                        "size_cm": {
                            "type": "object",
                            "properties": {"width": {"type": "integer"}, "height": {"type": "integer"}},
                            "required": ["width", "height"],
                        },
                        "fragile": {"type": "boolean", "default": False},
                    },
                    "required": ["weight_kg", "size_cm"],
                },
            },
            "service": {"type": "string", "enum": ["economy", "express", "overnight"], "default": "economy"},
            "notify_by": {"type": "array", "items": {"type": "string", "enum": ["sms", "email", "push"]}},
            "insured_value": {"type": "number", "minimum": 0},
        },
        "required": ["sender", "parcels"],
    },
    returns={"type": "object", "properties": {"shipment_id": {"type": "string"}, "price": {"type": "number"}}},
)


def one_function_tools(tools: Sequence[Tool], suffix: str) -> list[Tool]:
    """Each function of `tools` as a tool of its own (renamed with `suffix`): dialogues that offer
    one function, so that single calls and parallel calls of one function occur."""
    out = []
    for tool in tools:
        for f in tool.functions:
            function = f.model_copy(update={"name": f"{f.name}{suffix}"})
            out.append(Tool(name=f"{tool.name}:{f.name}", description=tool.description, category=tool.category,
                            source=tool.source, functions=[function]))
    return out


def bfcl_corpus(count: int, seed: int = 0) -> list[Dialogue]:
    """Valid dialogues of every BFCL category: the seed catalog's tools, each catalog function as
    a tool of its own, and :data:`SHIPMENT` alone and beside a catalog function."""
    catalog = pool(1)
    solo = one_function_tools(catalog, "_solo")
    beside = [SHIPMENT.model_copy(update={"name": f"{SHIPMENT.name}_2"}), *one_function_tools(catalog[:1], "_2")[0].functions]
    tools = [
        *catalog,
        *solo,
        Tool(name="Parcels", description="Ship parcels.", category="Logistics", source="catalog", functions=[SHIPMENT]),
        Tool(name="Parcels and more", description="Ship parcels.", category="Logistics", source="catalog", functions=beside),
    ]
    return with_sources(valid_dialogues(count, seed, tools=tools), tools)


def real_toolbench(shared_data: Path) -> list[Dialogue]:
    items = list(toolbench.read(shared_data / "toolbench/answer/G1_answer"))
    return [d for d in items if isinstance(d, Dialogue)]


def real_toolalpaca(shared_data: Path) -> list[Dialogue]:
    items = list(toolalpaca.read(shared_data / "toolalpaca/eval_simulated.json"))
    return [d for d in items if isinstance(d, Dialogue)]


def open_store(root: Path) -> ObjectStore:
    return ObjectStore.open(StorageConfig(root=str(root)))


def write_run(store: ObjectStore, dialogues: Sequence[Dialogue], run_id: str = RUN, shard_size: int = 25) -> None:
    """`dialogues` as the verify stage's accepted shards of `run_id` (with a rejected part and a
    metrics file beside them, which the export must not read)."""
    for n, start in enumerate(range(0, max(len(dialogues), 1), shard_size)):
        rows = [(d.id, d.to_json()) for d in dialogues[start:start + shard_size]]
        write_rows(store, f"runs/{run_id}/verify/part-{n:05d}.parquet", rows)
    write_rows(store, f"runs/{run_id}/verify/rejected/part-00000.parquet", [])
    store.write_bytes(f"runs/{run_id}/verify/_metrics/part-00000.json", b"{}")


def calls(dialogue: Dialogue, finish: bool = False) -> list[tuple[str, str]]:
    """(name, arguments text) of every call in order; ToolLLM's Finish left out unless asked."""
    return [(c.name, c.arguments) for m in dialogue.messages for c in m.tool_calls or [] if finish or c.name != "Finish"]


def parsed_calls(dialogue: Dialogue) -> list[tuple[str, Any]]:
    """Like :func:`calls` with the arguments parsed (formats that store them as JSON objects)."""
    return [(name, json.loads(arguments)) for name, arguments in calls(dialogue)]


def final_answer(dialogue: Dialogue) -> str | None:
    last = dialogue.messages[-1]
    return last.content if last.role == "assistant" and not last.tool_calls else None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def by_id(dialogues: Iterable[Dialogue]) -> dict[str, Dialogue]:
    return {d.id: d for d in dialogues}
