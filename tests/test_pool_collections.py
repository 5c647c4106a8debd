"""Collections for tools that come without one (ToolLLM §2.1, I3 sets): ToolBench's own grouping
where a file has it, else clustering within each category in the pool stage."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

from toolfactory.config import load_config
from toolfactory.models import Function, Tool
from toolfactory.stages import ShardContext, ShardSpec, StageOutput
from toolfactory.stages.pool.collections import derive_collections
from toolfactory.stages.pool.hierarchy import PoolHierarchy
from toolfactory.stages.pool.stage import PoolStage
from toolfactory.stages.tasks.sampling import sample_tool_set
from toolfactory.definitions.convert import convert
from toolfactory.stages.tools.sources import split_source
from toolfactory.storage import ObjectStore


def tool(name: str, category: str, *apis: str, collections: list[str] | None = None) -> Tool:
    return Tool(name=name, description=f"{name}.", category=category, source="toolbench", collections=collections or [],
                functions=[Function(name=api.replace(" ", "_"), description=api) for api in apis])


SPORTS = [
    tool("Football Live", "Sports", "football match scores", "football league table"),
    tool("Soccer Stats", "Sports", "football player goals", "football league fixtures"),
    tool("Premier Results", "Sports", "football match results", "league standings football"),
    tool("Hoops Data", "Sports", "basketball game box score", "basketball player rebounds"),
    tool("NBA Feed", "Sports", "basketball team roster", "basketball game schedule"),
    tool("Court Stats", "Sports", "basketball player assists", "basketball season averages"),
]
FINANCE = [tool("Stock Quotes", "Finance", "stock price quote"), tool("Market Data", "Finance", "stock market index")]


def pool_stage(root: Path, tools: list[Tool], *overrides: str) -> StageOutput:
    config = load_config(None, [f"storage.root={root}", *overrides], environ={})
    ctx = ShardContext(config=config, run_id="r", gateway=None, store=ObjectStore.open(config.storage))  # type: ignore[arg-type]
    return asyncio.run(PoolStage().run(ShardSpec("pool", 0, (), {"pool_tools": []}), [t.model_dump() for t in tools], ctx))


def test_tools_of_one_category_are_clustered_by_what_they_do() -> None:
    lone = tool("Weather Now", "Weather", "current weather")
    curated = tool("Cricket Scores", "Sports", "cricket scores", collections=["Cricket"])
    derived = derive_collections([*SPORTS, *FINANCE, lone, curated], size=3)
    football, basketball = ({derived[t.id][0] for t in group} for group in (SPORTS[:3], SPORTS[3:]))
    assert len(football) == len(basketball) == 1 and football != basketball
    assert next(iter(football)).startswith("Sports / ") and "football" in next(iter(football))
    assert {derived[t.id][0] for t in FINANCE} == {"Finance / stock, market, price"}  # one cluster: a collection per category
    assert lone.id not in derived and curated.id not in derived  # no partner; a source's own collection stays
    # The input order does not change the collections.
    assert derive_collections(list(reversed([*SPORTS, *FINANCE])), size=3) == {k: v for k, v in derived.items()}


def test_the_pool_stage_gives_imports_collections_that_i3_sets_are_drawn_from(tmp_path: Path) -> None:
    out = pool_stage(tmp_path, [*SPORTS, *FINANCE], "tools.pool.collection_size=3")
    tools = [t for t in out.records if isinstance(t, Tool)]
    assert all(t.collections and t.provenance["collections"] == "derived" for t in tools)
    assert out.profile["collections"] == {"derived": 8}
    hierarchy = PoolHierarchy(tools)
    tool_set = sample_tool_set(hierarchy, tools[0], "intra_collection", random.Random(1), max_tools=3, max_apis=3)
    assert tool_set.scenario == "intra_collection" and len(tool_set.tools) >= 2
    assert len({c for t in tool_set.tools for c in t.collections if all(c in u.collections for u in tool_set.tools)}) == 1


def test_a_g3_query_file_groups_its_tools_into_collections(tmp_path: Path) -> None:
    def api(tool_name: str, category: str) -> dict[str, object]:
        return {"category_name": category, "tool_name": tool_name, "api_name": f"{tool_name} info", "method": "GET"}

    queries = [{"query_id": 7, "api_list": [api("Movies DB", "Movies"), api("Cinema Times", "Entertainment")]},
               {"query_id": 8, "api_list": [api("Movies DB", "Movies")]}]
    for name in ("G3_query.json", "G2_query.json"):
        (tmp_path / name).write_text(json.dumps(queries))
    g3 = {t.name: t.collections for raw in split_source(tmp_path / "G3_query.json", "toolbench") for t in convert("toolbench", raw)}
    assert g3 == {"Movies DB": ["ToolBench G3 query 7"], "Cinema Times": ["ToolBench G3 query 7"]}
    g2 = [t for raw in split_source(tmp_path / "G2_query.json", "toolbench") for t in convert("toolbench", raw)]
    assert all(not t.collections for t in g2)  # G2 groups a category, not a collection
    [named] = convert("toolbench", {"tool_name": "X", "collection_name": "Top Movies", "api_list": []})
    assert named.collections == ["Top Movies"]


def test_released_toolbench_tools_get_collections_within_their_category(tmp_path: Path, shared_data: Path) -> None:
    raws = split_source(shared_data / "toolbench/instruction/G1_query.json", "toolbench")
    imported = [t for raw in raws for t in convert("toolbench", raw)]
    folder = shared_data / "toolbench/response_examples"
    for path in sorted(folder.glob("*/*.json")):
        try:
            apis = json.loads(path.read_text()).get("api_list") or []
        except json.JSONDecodeError:  # some released example files are empty
            continue
        raw = {"tool_name": path.stem.replace("_", " "), "category_name": path.parent.name,
               "api_list": [{"name": a["name"]} for a in apis if isinstance(a, dict) and a.get("name")]}
        imported += convert("toolbench", raw)
    assert all(not t.collections for t in imported)  # ToolBench's tool files carry none
    out = pool_stage(tmp_path, imported, "tools.pool.collection_size=2")
    tools = [t for t in out.records if isinstance(t, Tool)]
    by_collection: dict[str, set[str]] = {}
    for t in tools:
        for c in t.collections:
            by_collection.setdefault(c, set()).add(t.category)
    assert by_collection and all(len(categories) == 1 for categories in by_collection.values())
    logistics = [t for t in tools if t.category == "Logistics"]
    assert len(logistics) == 2 and logistics[0].collections == logistics[1].collections != []
