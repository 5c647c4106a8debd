"""The tool pool: near-duplicate removal across sources and runs, pool statistics, and the pool
in <root>/pool growing run after run without duplicates (real Prefect, Ray and simulator)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import duckdb
import pytest

from conftest import small_run_overrides
from toolfactory.catalog import load_seed_catalog
from toolfactory.config import load_config
from toolfactory.models import DomainNode, Tool
from toolfactory.run.pool import TOOLS, TREE, pool_files
from toolfactory.storage.shards import read_records, write_rows
from toolfactory.stages import ShardContext, ShardSpec, StageOutput
from toolfactory.stages.pool.dedup import signature
from toolfactory.stages.pool.hierarchy import PoolHierarchy
from toolfactory.stages.pool.stage import PoolStage
from toolfactory.definitions.convert import convert
from toolfactory.storage import ObjectStore

TOOLFACTORY = str(Path(sys.executable).with_name("toolfactory"))


def pool_stage(root: Path, tools: list[Tool], known_files: list[str] = (), *overrides: str) -> StageOutput:  # type: ignore[assignment]
    config = load_config(None, [f"storage.root={root}", *overrides], environ={})
    ctx = ShardContext(config=config, run_id="r", gateway=None, store=ObjectStore.open(config.storage))  # type: ignore[arg-type]
    spec = ShardSpec("pool", 0, (), {"pool_tools": list(known_files)})
    return asyncio.run(PoolStage().run(spec, [t.model_dump() for t in tools], ctx))


def real_tools(shared_data: Path) -> list[Tool]:
    queries = json.loads((shared_data / "toolbench/instruction/G1_query.json").read_text())
    from toolfactory.stages.tools.sources import _toolbench_tools_from_queries

    toolbench = [t for raw in _toolbench_tools_from_queries(queries) for t in convert("toolbench", raw)]
    toolalpaca = [t for raw in json.loads((shared_data / "toolalpaca/eval_simulated.json").read_text()) for t in convert("toolalpaca", raw)]
    return load_seed_catalog() + toolbench + toolalpaca


def test_distinct_real_tools_are_all_kept_and_profiled(tmp_path: Path, shared_data: Path) -> None:
    tools = real_tools(shared_data)
    out = pool_stage(tmp_path, tools)
    assert len(out.records) == len(tools) and not out.rejected
    assert out.profile["tools_by_source"] == {"catalog": 36, "toolbench": len(tools) - 46, "toolalpaca": 10}
    assert sum(out.profile["functions_by_source"].values()) == sum(len(t.functions) for t in tools)
    assert sum(out.profile["functions_per_tool"].values()) == len(tools)
    assert out.profile["pool"] == {"new": len(tools)}
    assert sum(out.profile["nesting_depth"].values()) == sum(len(t.functions) for t in tools)
    assert {"string", "integer", "number", "boolean", "array", "object"} <= set(out.profile["parameter_types"])
    assert out.profile["tools_by_domain"]["Weather"] >= 3


def test_a_reworded_copy_from_another_source_is_a_near_duplicate(tmp_path: Path) -> None:
    original = load_seed_catalog()[0]
    copy = original.model_copy(deep=True, update={"id": "", "source": "openai", "name": original.name + "V2"})
    copy.description = "Weather: " + copy.description
    copy = Tool.model_validate(copy.model_dump())  # a new id, as a different source would give
    other = load_seed_catalog()[5]
    out = pool_stage(tmp_path, [original, other, copy])
    assert [t.name for t in out.records] == [original.name, other.name]
    assert out.rejections() == {"tool_near_duplicate": 1}
    assert original.name in out.rejected[0].detail and out.rejected[0].id == copy.id
    assert signature(original).jaccard(signature(copy)) >= 0.7 > signature(original).jaccard(signature(other))


def test_tools_already_in_the_pool_are_reused_as_known_or_skipped(tmp_path: Path) -> None:
    catalog = load_seed_catalog()
    store = ObjectStore.open(load_config(None, [f"storage.root={tmp_path}"], environ={}).storage)
    write_rows(store, f"{TOOLS}/earlier.parquet", [(t.id, t.to_json()) for t in catalog[:3]])
    out = pool_stage(tmp_path, catalog[2:5], [f"{TOOLS}/earlier.parquet"])
    assert [t.provenance["pool"] for t in out.records] == ["known", "new", "new"]  # type: ignore[attr-defined]
    skipped = pool_stage(tmp_path, catalog[2:5], [f"{TOOLS}/earlier.parquet"], "tools.pool.skip_known=true")
    assert [t.name for t in skipped.records] == [catalog[3].name, catalog[4].name]
    assert skipped.rejections() == {"tool_known_in_pool": 1}


def test_the_hierarchy_groups_tools_by_category_collection_and_domain() -> None:
    catalog = load_seed_catalog()
    hierarchy = PoolHierarchy(catalog)
    weather = hierarchy.by_category["Weather"]
    assert len(weather) == 3 and all(hierarchy.tools[i].category == "Weather" for i in weather)
    assert all(catalog[0].id in hierarchy.by_collection[c] for c in catalog[0].collections)
    same = hierarchy.same_domain(catalog[0].id)
    assert catalog[0].id in same and all(hierarchy.tools[i].domain_path[0] == catalog[0].domain_path[0] for i in same)


@pytest.mark.e2e
def test_the_pool_grows_run_after_run_without_duplicates(
    prefect_api: str, toolfactory_here: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    from flows.generate import generate
    from flows.rerun import rerun

    root = tmp_path / "data"
    overrides = small_run_overrides(root, **{
        "tools.max_tools": 4, "tools.synthesis.count": 3, "tasks.instructions_per_tool": 1, "verify.judges": "[]",
    })
    first = generate(config_path=None, overrides=overrides)
    assert first["status"] == "completed"
    store = ObjectStore.open(load_config(None, [f"storage.root={root}"], environ={}).storage)
    [tools_file] = pool_files(store, TOOLS)
    [tree_file] = pool_files(store, TREE)
    first_pool = [Tool.model_validate(r) for r in read_records(store, tools_file)]
    by_source = {t.source for t in first_pool}
    assert len(first_pool) >= 5 and by_source == {"catalog", "synthesized"}
    assert all(t.provenance["pool_run"] == first["run_id"] for t in first_pool)
    first_tree = [DomainNode.model_validate(r) for r in read_records(store, tree_file)]
    assert {len(n.path) for n in first_tree} == {1, 2, 3, 4}

    # Publishing again (a re-run of a finished run) writes the same pool file.
    before = (root / tools_file).read_bytes()
    assert rerun(run_id=first["run_id"], config_path=None, overrides=[f"storage.root={root}"])["status"] == "completed"
    assert (root / tools_file).read_bytes() == before and len(pool_files(store, TOOLS)) == 1

    second = generate(config_path=None, overrides=overrides)
    assert second["status"] == "completed"
    run_tools = [Tool.model_validate(r) for r in read_records(store, f"runs/{second['run_id']}/pool/part-00000.parquet")]
    assert [t.provenance["pool"] for t in run_tools if t.source == "catalog"] == ["known"] * 4  # imported by both runs
    pool_stats = next(s for s in second["stages"] if s["stage"] == "pool")
    assert pool_stats["profile"]["pool"]["known"] == sum(t.provenance["pool"] == "known" for t in run_tools)
    pooled = [Tool.model_validate(r) for path in pool_files(store, TOOLS) for r in read_records(store, path)]
    assert len({t.id for t in pooled}) == len(pooled) > len(first_pool)
    signatures = [signature(t) for t in pooled]
    assert all(a.jaccard(b) < 0.7 for a, b in itertools.combinations(signatures, 2))
    grown = [r for path in pool_files(store, TREE) for r in read_records(store, path)]
    assert len(grown) > len(first_tree) and len({r["id"] for r in grown}) == len(grown)

    with duckdb.connect(str(root / "stats.duckdb"), read_only=True) as con:
        rows = con.execute(
            "SELECT dimension, sum(count) FROM profiles WHERE run_id = ? AND stage = 'pool' GROUP BY dimension", [second["run_id"]]
        ).fetchall()
    assert {"tools_by_source", "tools_by_domain", "parameter_types", "nesting_depth", "functions_per_tool"} <= {d for d, _ in rows}
    shown = toolfactory_here("stats", second["run_id"], "--set", f"storage.root={root}")
    assert "pool tools_by_source: catalog=4" in shown.stdout and "pool parameter_types:" in shown.stdout


@pytest.mark.fault_matrix
@pytest.mark.e2e
def test_two_runs_at_once_on_one_root_keep_the_pool_and_the_datasets_whole(
    prefect_api: str, ray_head: str, toolfactory_here: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    root = tmp_path / "data"
    # The run that waits finds every dialogue of the other one known: its dataset may be empty.
    overrides = small_run_overrides(root, **{"tools.max_tools": 4, "tasks.instructions_per_tool": 1, "verify.judges": "[]",
                                             "run.min_accepted": 0})
    args = ["run", *(a for o in overrides for a in ("--set", o))]
    env = {**os.environ, "PREFECT_API_URL": prefect_api, "RAY_AUTH_MODE": "disabled", "RAY_ADDRESS": ray_head}
    # Two drivers: one in another process, one in this one (the command's entry point). The other
    # writes to a file: a pipe nobody reads while this one runs could fill and stop it.
    log = tmp_path / "other.log"
    with log.open("w") as out:
        other = subprocess.Popen([TOOLFACTORY, *args], env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            here = toolfactory_here(*args)
            other.wait(timeout=900)
        finally:
            if other.poll() is None:
                other.kill()
                other.wait()
    assert [other.returncode, here.returncode] == [0, 0], [log.read_text()[-3000:], (here.stdout + here.stderr)[-3000:]]
    store = ObjectStore.open(load_config(None, [f"storage.root={root}"], environ={}).storage)
    pooled = [r["id"] for path in pool_files(store, TOOLS) for r in read_records(store, path)]
    assert len(pooled) == len(set(pooled)) == 4  # the second run found the first's tools known
    run_ids = sorted(p.name for p in (root / "runs").iterdir())
    datasets = [{json.dumps(r["messages"]) for r in read_records(store, f"runs/{run_id}/curate/part-00000.parquet")} for run_id in run_ids]
    # Either run may take the lease first: the other finds every dialogue of it known.
    assert (datasets[0] or datasets[1]) and not datasets[0] & datasets[1]  # no dialogue kept by both
