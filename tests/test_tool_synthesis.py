"""Tool synthesis through the real gateway and the simulator over HTTP: documentation from
introductions (ToolAlpaca), the context tree and self-evolving synthesis (ToolACE TSS)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest
from openapi_spec_validator import validate as validate_openapi

from conftest import http
from toolfactory.config import load_config
from toolfactory.llm import Endpoint, LLMGateway
from toolfactory.models import DomainNode, Function, Tool
from toolfactory.storage.shards import write_rows
from toolfactory.simulator import SimulatorSettings, start_simulator
from toolfactory.stages import ShardContext, ShardSpec, StageOutput
from toolfactory.stages.domains.stage import DomainsStage
from toolfactory.stages.domains.tree import ContextTree
from toolfactory.definitions.validity import definition_problems, lookup_problems
from toolfactory.stages.tools.fields import nesting_depth, object_schema, parameter_types
from toolfactory.stages.tools.introductions import assemble_openapi
from toolfactory.stages.tools.sources import SourceItem
from toolfactory.stages.tools.stage import ToolsStage
from toolfactory.stages.tools.synthesis import EVOLVE_PROMPT, wanted_types
from toolfactory.storage import ObjectStore

GENERATION_REASONS = {
    "tool_openapi_invalid", "tool_openapi_incomplete", "tool_duplicate_parameter", "tool_duplicate_function",
    "tool_id_without_lookup", "tool_invalid_schema", "tool_schema_too_deep", "tool_non_text_io",
    "llm_schema_mismatch", "llm_malformed_json",
}


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    with start_simulator(SimulatorSettings()) as simulator:
        yield simulator


def run_stage(sim: Any, stage: Any, spec: ShardSpec, inputs: list[dict[str, Any]], root: Path,
              true_rate: float = 0.5, *overrides: str) -> StageOutput:
    http.post(f"{sim.root_url}/simulator/settings", json={"boolean_true_rate": true_rate}).raise_for_status()
    config = load_config(None, [f"storage.root={root}", *overrides], environ={})
    store = ObjectStore.open(config.storage)

    async def go() -> StageOutput:
        async with LLMGateway(Endpoint(sim.base_url, "sk-test"), config.llm) as gateway:
            ctx = ShardContext(config=config, run_id="r", gateway=gateway, store=store)
            return await stage.run(spec, inputs, ctx)

    return asyncio.run(go())


def public_api_items(shared_data: Path, count: int) -> list[dict[str, Any]]:
    entries = json.loads((shared_data / "toolalpaca" / "public_apis.json").read_text())["entries"][:count]
    return [SourceItem(id=f"item{k}", format="introductions", origin="public_apis.json", raw=raw).model_dump() for k, raw in enumerate(entries)]


# --- fields and OpenAPI assembly -----------------------------------------------------------


def field(name: str, kind: str, required: bool = False, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, "description": f"The {name}.", "required": required, **extra}


def test_fields_become_nested_json_schema_with_bounds_enums_and_required() -> None:
    problems: list[tuple[str, str]] = []
    schema = object_schema([
        field("city", "string", True, enum=["Paris", "Rome"], minimum=3),
        field("nights", "integer", True, minimum=1, maximum=30.0),
        field("guests", "array", items_type="object", properties=[field("age", "integer", True), field("name", "string")]),
        field("filters", "object", properties=[field("max_price", "number", maximum=500.5)]),
        field("tags", "array", items_type="string"),
    ], "book", problems)
    assert problems == []
    props = schema["properties"]
    assert schema["required"] == ["city", "nights"]
    assert props["city"] == {"type": "string", "description": "The city.", "enum": ["Paris", "Rome"]}  # bounds do not apply to strings
    assert props["nights"]["maximum"] == 30 and isinstance(props["nights"]["maximum"], int)
    assert props["guests"]["items"] == {"type": "object", "properties": {
        "age": {"type": "integer", "description": "The age."}, "name": {"type": "string", "description": "The name."}}, "required": ["age"]}
    assert props["filters"]["properties"]["max_price"]["maximum"] == 500.5
    assert props["tags"]["items"] == {"type": "string"}
    assert parameter_types(schema) == Counter({"string": 2, "integer": 2, "array": 2, "object": 1, "number": 1})
    assert nesting_depth(schema) == 2 and nesting_depth({"type": "object", "properties": {}}) == 0


def test_duplicate_fields_and_inverted_bounds_are_problems() -> None:
    problems: list[tuple[str, str]] = []
    object_schema([field("a", "string"), field("a", "integer"), field("n", "number", minimum=5, maximum=1)], "f", problems)
    assert [code for code, _ in problems] == ["tool_duplicate_parameter", "tool_invalid_schema"]


def operation(op_id: str, method: str, path: str, parameters: list[dict[str, Any]], response: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"operationId": op_id, "method": method, "path": path, "summary": op_id, "description": f"Does {op_id}.",
            "parameters": parameters, "response": response or [field("id", "string", True)]}


def assembled(*operations: dict[str, Any]) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    answer = {"title": "Pets", "version": "1.0", "description": "Find pets to adopt.", "operations": list(operations)}
    return assemble_openapi(answer, {"name": "Pets", "link": "https://pets.example.com", "introduction": "x", "category": "Animals"})


def test_parameters_go_to_the_path_the_query_or_the_body_and_the_document_validates() -> None:
    problems, document = assembled(
        operation("searchPets", "get", "/pets", [field("species", "string", True), field("limit", "integer")]),
        operation("getPet", "get", "/pets/{pet_id}", [field("pet_id", "string", False)]),
        operation("adoptPet", "post", "/pets/{pet_id}/adoptions", [field("pet_id", "string", True), field("adopter", "string", True)]),
    )
    assert problems == []
    validate_openapi(document)
    search = document["paths"]["/pets"]["get"]["parameters"]
    assert [(p["name"], p["in"], p["required"]) for p in search] == [("species", "query", True), ("limit", "query", False)]
    assert document["paths"]["/pets/{pet_id}"]["get"]["parameters"][0]["in"] == "path"
    adopt = document["paths"]["/pets/{pet_id}/adoptions"]["post"]
    assert [p["name"] for p in adopt["parameters"]] == ["pet_id"]
    assert adopt["requestBody"]["content"]["application/json"]["schema"]["required"] == ["adopter"]


def test_unresolved_path_templates_and_clashing_endpoints_are_problems() -> None:
    problems, _ = assembled(operation("getPet", "get", "/pets/{pet_id}", [field("id", "string", True)]))
    assert [code for code, _ in problems] == ["tool_openapi_invalid"] and "pet_id" in problems[0][1]
    problems, _ = assembled(operation("a", "get", "/pets", []), operation("b", "get", "/pets", []))
    assert ("tool_openapi_invalid", "GET /pets is used by two operations") in problems
    problems, _ = assembled(operation("a", "get", "/a", []), operation("a", "get", "/b", []))
    assert [code for code, _ in problems][0] == "tool_openapi_incomplete"  # (the validator also objects)


def test_an_id_a_user_cannot_know_needs_a_function_that_returns_it() -> None:
    get_pet = Function(name="get_pet", description="d", parameters={"type": "object", "properties": {"pet_id": {"type": "string"}}, "required": ["pet_id"]})
    lonely = Tool(name="Pets", functions=[get_pet])
    assert [code for code, _ in lookup_problems(lonely)] == ["tool_id_without_lookup"]
    search = Function(name="search_pets", description="d", returns={"type": "array", "items": {"type": "object", "properties": {"pet_id": {"type": "string"}}}})
    assert lookup_problems(Tool(name="Pets", functions=[get_pet, search])) == []
    optional = Function(name="list", description="d", parameters={"type": "object", "properties": {"pet_id": {"type": "string"}}})
    assert lookup_problems(Tool(name="Pets", functions=[optional])) == []


# --- documentation from introductions, through the simulator ---------------------------------


def test_introductions_become_tools_with_a_valid_openapi_document_or_reason_coded_rejections(sim: Any, shared_data: Path, tmp_path: Path) -> None:
    items = public_api_items(shared_data, 16)
    out = run_stage(sim, ToolsStage(), ShardSpec("tools", 0, ()), items, tmp_path, 0.95)
    assert len(out.records) + len(out.rejected) == out.items_in == 16
    assert out.records, out.rejections()
    names = {raw["raw"]["API"] for raw in items}
    for tool in out.records:
        assert isinstance(tool, Tool) and tool.source == "generated" and tool.name in names
        validate_openapi(tool.openapi)
        operation_ids = {op["operationId"] for ops in tool.openapi["paths"].values() for op in ops.values()}
        assert operation_ids == {fn.name for fn in tool.functions}
        assert definition_problems(tool) == [] and lookup_problems(tool) == []
        assert tool.description and tool.introduction and tool.category
    assert set(out.rejections()) <= GENERATION_REASONS
    assert all(r.detail for r in out.rejected)


def test_apis_whose_inputs_or_outputs_are_not_text_are_left_out(sim: Any, shared_data: Path, tmp_path: Path) -> None:
    out = run_stage(sim, ToolsStage(), ShardSpec("tools", 0, ()), public_api_items(shared_data, 3), tmp_path, 0.0)
    assert not out.records and out.rejections() == {"tool_non_text_io": 3}


def test_a_malformed_introduction_is_rejected_and_the_rest_documented(sim: Any, tmp_path: Path) -> None:
    items = [SourceItem(id="bad", format="introductions", origin="x", raw={"link": "https://x"}).model_dump(),
             SourceItem(id="fine", format="catalog", origin="x", raw={"name": "T", "description": "d", "functions": [{"name": "f", "description": "d"}]}).model_dump()]
    out = run_stage(sim, ToolsStage(), ShardSpec("tools", 0, ()), items, tmp_path, 0.95)
    assert out.rejections() == {"tool_malformed": 1} and [t.name for t in out.records] == ["T"]


# --- speciation and synthesis (ToolACE TSS), through the simulator ---------------------------


def catalog_items() -> list[dict[str, Any]]:
    from toolfactory.catalog import load_seed_catalog

    return [SourceItem(id=t.id, format="catalog", origin="c", raw=t.model_dump()).model_dump() for t in load_seed_catalog()[:8]]


def test_speciation_builds_a_four_level_tree_from_documents_and_grows_a_known_one(sim: Any, tmp_path: Path) -> None:
    out = run_stage(sim, DomainsStage(), ShardSpec("domains", 0, (), {}), catalog_items(), tmp_path)
    nodes = [n for n in out.records if isinstance(n, DomainNode)]
    tree = ContextTree(nodes)
    # Domain, subdomain, fine-grained domain, functionality: the paper's levels.
    assert {len(n.path) for n in nodes} == {1, 2, 3, 4} and len(tree) == len(nodes)
    # Whole paths down to functionalities come from reading the documents, more from the model.
    by_origin = {origin: {len(n.path) for n in nodes if n.origin == origin} for origin in ("document", "model")}
    assert by_origin["document"] == {1, 2, 3, 4} and by_origin["model"] >= {2, 3, 4}
    assert all(n.description.startswith("From: ") for n in nodes if n.origin == "document" and len(n.path) < 4)
    assert out.profile["new_nodes_by_origin"] == Counter(n.origin for n in nodes)
    for node in nodes:  # every node hangs under a parent of the tree
        assert len(node.path) == 1 or node.path[:-1] in tree
    assert out.profile["new_nodes_by_depth"] == Counter(str(len(n.path)) for n in nodes)

    store = ObjectStore.open(load_config(None, [f"storage.root={tmp_path}"], environ={}).storage)
    write_rows(store, "pool/tree/earlier.parquet", [(n.id, n.to_json()) for n in nodes])
    again = run_stage(sim, DomainsStage(), ShardSpec("domains", 0, (), {"pool_tree": ["pool/tree/earlier.parquet"]}),
                      catalog_items(), tmp_path, 0.5, "run.seed=7")
    added = [n for n in again.records if isinstance(n, DomainNode)]
    assert added and not any(n.path in tree for n in added)  # only nodes the pool did not hold
    grown = ContextTree([*nodes, *added])
    assert sum(again.profile["tree_nodes_by_depth"].values()) == len(grown)


@pytest.mark.parametrize("seed", [1, 3, 4])
def test_no_domain_is_named_after_a_placeholder_of_the_prompt(sim: Any, tmp_path: Path, seed: int) -> None:
    # A first run knows no domain yet: its prompt must not say so with a word a model may take for
    # a name (with these seeds the simulator made domains such as "none MedInfoLookup Consumer").
    from toolfactory.catalog import load_seed_catalog

    items = [SourceItem(id=t.id, format="catalog", origin="c", raw=t.model_dump()).model_dump() for t in load_seed_catalog()]
    out = run_stage(sim, DomainsStage(), ShardSpec("domains", 0, (), {}), items, tmp_path, 0.5, f"run.seed={seed}")
    nodes = [n for n in out.records if isinstance(n, DomainNode)]
    assert nodes and not [n.path for n in nodes if any("none" in part.casefold().split() for part in n.path)]


def test_synthesis_adapts_subtrees_into_valid_apis_and_evolves_its_buffer(sim: Any, tmp_path: Path) -> None:
    tree = run_stage(sim, DomainsStage(), ShardSpec("domains", 0, (), {}), catalog_items(), tmp_path).records
    known = ContextTree([n for n in tree if isinstance(n, DomainNode)])
    spec = ShardSpec("tools", 5, (), {"synthesize": {"first": 0, "count": 12}})
    out = run_stage(sim, ToolsStage(), spec, [n.model_dump() for n in tree], tmp_path, 0.5, "tools.synthesis.generation_size=4")
    assert len(out.records) + len(out.rejected) == out.items_in == 12
    assert len(out.records) >= 6, out.rejections()
    assert set(out.rejections()) <= GENERATION_REASONS
    for tool in out.records:
        assert isinstance(tool, Tool) and tool.source == "synthesized"
        assert definition_problems(tool) == [] and lookup_problems(tool) == []
        assert tool.domain_path in known and tool.category == tool.domain_path[0]
        leaves = tool.provenance["functionalities"]
        assert 1 <= tool.provenance["complexity"] == len(leaves) <= 3
        assert all(tool.domain_path + [leaf] in known for leaf in leaves)
        assert len(tool.functions) <= len(leaves) + 1
        assert tool.provenance["operations"] and tool.provenance["example"]
        # The schema requires a nested object parameter on complex APIs, else the most-needed type.
        top = [p for fn in tool.functions for p in fn.parameters["properties"].values()]
        if tool.provenance["nested"]:
            assert any(p.get("type") == "object" and p.get("properties") for p in top)
        else:
            assert any(p.get("type") == tool.provenance["asked_types"][0] for p in top)
    assert len({t.provenance["example"] for t in out.records}) > 1


def test_synthesis_without_a_context_tree_rejects_with_a_reason(sim: Any, tmp_path: Path) -> None:
    out = run_stage(sim, ToolsStage(), ShardSpec("tools", 0, (), {"synthesize": {"first": 0, "count": 2}}), [], tmp_path)
    assert out.rejections() == {"synthesis_no_context": 2}


def test_type_balance_asks_for_the_types_furthest_below_target() -> None:
    targets = {"string": 0.3, "integer": 0.15, "number": 0.13, "boolean": 0.12, "array": 0.15, "object": 0.15}
    assert wanted_types(Counter({"string": 90, "integer": 10}), targets) == ["array", "object"]
    assert wanted_types(Counter({"string": 30, "integer": 15, "number": 13, "array": 15, "object": 15}), targets)[0] == "boolean"
    assert "{types}" in EVOLVE_PROMPT
