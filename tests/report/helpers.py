"""A small real run for the report tests, written without Prefect: the stats database through
:class:`StatsDB`'s public methods, with shard metrics shaped as :mod:`toolfactory.run.execution`
builds them, and the verify stage's accepted shards as Parquet files in a local store."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Sequence

from toolfactory.catalog import load_seed_catalog
from toolfactory.config import StorageConfig
from toolfactory.llm.usage import UsageMeter
from toolfactory.models import Tool, ToolRef
from toolfactory.config import validate_config
from toolfactory.run.manifest import Manifest, write_manifest
from toolfactory.models import Rejected
from toolfactory.storage.shards import _parquet_bytes as _parquet
from toolfactory.storage.shards import rejected_table, write_rows
from benchmarks.corpus import valid_dialogues
from toolfactory.run.metrics import ShardMetrics
from toolfactory.run.stats import StatsDB
from toolfactory.storage import ObjectStore

RUN = "20261122-030000-report"
EVIL = "<script>alert(1)</script>"  # a data string that must be shown as text, never run
EARLIER = "20261121-030000-report"  # a run before RUN in the same storage root
REJECTION_MESSAGES = {  # verify reasons of `write_stats` and the message of the rule's verdict
    "call_unknown_function": "function 'find_flights' is not among the offered tools",
    EVIL: f"a message that quotes {EVIL}",
}
PRICES = {"usd_per_million_prompt_tokens": 2.0, "usd_per_million_completion_tokens": 8.0}
EXPORT_FILES = ("openai/train.jsonl", "openai/test.jsonl", "hf/README.md")


def write_run_files(store: ObjectStore, provider: str = "simulator", run_id: str = RUN,
                    preflight: dict[str, Any] | None = None) -> None:
    """What a run leaves beside its shards: the manifest (every role priced) and export files."""
    roles = {role: {"model": f"model-{role}", **PRICES} for role in ("user", "assistant", "tool", "judge", "designer")}
    llm = {"provider": provider, "roles": roles, **({"base_url": "http://127.0.0.1:9/v1"} if provider != "simulator" else {})}
    config = validate_config({"llm": llm, "storage": {"root": store.url}})
    write_manifest(store, Manifest.create(run_id, config, {}, preflight))
    for name in EXPORT_FILES:
        store.write_bytes(f"runs/{run_id}/export/{name}", b"{}\n")
ROLES = {  # stage -> role -> (calls, cache hits, prompt tokens, completion tokens) per shard
    "domains": {"designer": (3, 1, 900, 300)},
    "tools": {"designer": (10, 2, 4000, 2500)},
    "tasks": {"user": (12, 0, 3000, 1200)},
    "dialogues": {"assistant": (30, 5, 9000, 2000), "tool": (20, 5, 4000, 1500), "user": (8, 0, 1600, 400)},
    "verify": {"judge": (16, 4, 6400, 800)},
}


def open_store(root: Path) -> ObjectStore:
    return ObjectStore.open(StorageConfig(root=str(root)))


def metrics(
    stage: str, shard: int, items_in: int, items_out: int, rejections: dict[str, int] | None = None,
    rejected: int | None = None, layers: dict[str, list[int]] | None = None,
    profile: dict[str, dict[str, int]] | None = None, run_id: str = RUN,
) -> ShardMetrics:
    """A shard's metrics as `toolfactory.run.execution._run` returns them, its LLM use measured by a
    real :class:`UsageMeter` from :data:`ROLES`."""
    meter = UsageMeter()
    for role, (calls, hits, prompt, completion) in ROLES.get(stage, {}).items():
        usage = meter.role(role)
        usage.calls, usage.cache_hits, usage.prompt_tokens, usage.completion_tokens = calls, hits, prompt, completion
        usage.latency_s = 0.5 * calls
    reasons = rejections or {}
    return ShardMetrics.from_dict({
        "attempt_id": f"{stage}-{shard}-{run_id}",
        "run_id": run_id,
        "stage": stage,
        "shard": shard,
        "fingerprint": f"fp-{stage}-{shard}",
        "items_in": items_in,
        "items_out": items_out,
        "rejected": sum(reasons.values()) if rejected is None else rejected,
        "rejections": reasons,
        "layers": layers or {},
        "profile": profile or {},
        "llm": meter.totals(),
        "llm_by_role": meter.to_dict(),
        "started_at": "2026-11-22T03:00:00.000+00:00",
        "finished_at": "2026-11-22T03:00:05.000+00:00",
        "wall_s": 5.0,
    })


def write_stats(path: Path, run_id: str = RUN, storage: str = "/tmp/store", started_at: str = "2026-11-22T03:00:00") -> StatsDB:
    """The stats of a six-stage run: two shards per sharded stage, one dialogues shard failed
    (its attempt's LLM use counted), rejections with several reasons, verify's two layers and
    the profiles the pool and tasks stages record."""
    db = StatsDB(path)
    with db.burst():  # one open of the file for all of it, as the driver writes a stage's results
        db.start_run(run_id, started_at, storage, {"run": {"seed": 1}}, {"toolfactory": "0"}, started_at)
        db.record_shard(metrics("domains", 0, 4, 9, run_id=run_id), attempts=1)
        for shard in (0, 1):
            db.record_shard(metrics("tools", shard, 23, 21, {"tool_invalid_openapi": 1, "tool_no_functions": 1}, run_id=run_id), 1)
        pool_profile = {
            "tools_by_source": {"catalog": 36, "synthesized": 4},
            "functions_by_source": {"catalog": 30, "synthesized": 6},
            "tools_by_domain": {"Weather": 16, "Finance": 11, "Travel": 10, EVIL: 3},
            "pool": {"new": 40},
        }
        db.record_shard(metrics("pool", 0, 42, 40, {"tool_near_duplicate": 2}, profile=pool_profile, run_id=run_id), 1)
        for shard in (0, 1):
            profile: dict[str, dict[str, int]] = {
                "recipes": {"toolace": 10, "toolllm": 8},
                "tool_uses": {f"tool-{shard}-{k}": 2 for k in range(6)},  # 12 distinct pool tools in all
                "api_uses": {f"tool-{shard}-{k}/f": 2 for k in range(9)},
            }
            if shard == 0:
                profile["coverage"] = {"pool_tools": 40}
            db.record_shard(metrics("tasks", shard, 9, 18, {"task_no_relevant_api": 1}, run_id=run_id, profile=profile), 1)
        db.record_shard(metrics("dialogues", 0, 18, 16, {"dialogue_no_call": 2, "llm_invalid_json": 1}, rejected=2, run_id=run_id), 1)
        failed = metrics("dialogues", 1, 18, 0, run_id=run_id)
        db.record_shard_status(run_id, "dialogues", 1, "failed", 3, "2 of 18 records failed on transient LLM errors",
                               failed.fingerprint, metrics=failed)
        verify_reasons = [
            {"call_unknown_function": 2, "answer_missing": 1, EVIL: 1},
            {"call_unknown_function": 1, "judge_unhelpful": 2},
        ]
        for shard, reasons in enumerate(verify_reasons):
            db.record_shard(metrics("verify", shard, 10 - 2 * shard, 7, reasons, rejected=3 - 2 * shard,
                                    layers={"rules": [10 - 2 * shard, 9 - 2 * shard], "model": [9 - 2 * shard, 7]},
                                    run_id=run_id), 1)
        db.finish_run(run_id, "failed", "2026-11-22T03:10:00")
    return db


@dataclass(frozen=True)
class DialogueOptions:
    """Fields a curation stage may add, and the target mode a task may ask for."""

    complexity: bool = True
    cluster: bool = True
    target_mode: bool = True


@lru_cache(maxsize=1)
def catalog() -> tuple[Tool, ...]:
    return tuple(load_seed_catalog())  # parsed once: it takes a second


@lru_cache(maxsize=None)
def dialogue_rows(count: int, seed: int, options: DialogueOptions) -> tuple[tuple[str, str], ...]:
    """(id, JSON) rows of valid dialogues with recipe, source tools and, as `options` say, a
    target mode, a complexity and a cluster (fields the Dialogue model does not declare yet)."""
    owner = {f.name: t for t in catalog() for f in t.functions}
    recipes = ("toolace", "toolllm", EVIL)
    rows = []
    for k, dialogue in enumerate(valid_dialogues(count, seed, tools=catalog())):
        tools = {owner[f.name].id: owner[f.name] for f in dialogue.tools if f.name in owner}
        refs = [ToolRef(id=t.id, name=t.name, category=t.category, source=t.source) for t in tools.values()]
        update: dict[str, Any] = {"recipe": recipes[k % 3], "source_tools": refs, "llm_calls": 3}
        if options.target_mode:
            update["target_mode"] = "parallel" if k % 4 == 0 else dialogue.mode
        record = dialogue.model_copy(update=update).model_dump(mode="json", exclude_none=True)
        if options.complexity:
            record["complexity"] = 1 + k % 5
        if options.cluster:
            record["cluster"] = EVIL if k % 6 == 0 else f"cluster-{k % 3}"
        rows.append((dialogue.id, json.dumps(record)))
    return tuple(rows)


def write_dialogues(store: ObjectStore, shards: Sequence[int], options: DialogueOptions = DialogueOptions(),
                    run_id: str = RUN) -> list[dict[str, Any]]:
    """Accepted verify shards of the given sizes, plus a rejected part and a metrics sidecar that
    the report must not count; the accepted records."""
    written: list[dict[str, Any]] = []
    for n, size in enumerate(shards):
        rows = dialogue_rows(size, seed=n + 1, options=options)
        write_rows(store, f"runs/{run_id}/verify/part-{n:05d}.parquet", list(rows))
        written += [json.loads(text) for _, text in rows]
    rejected = [Rejected(id=f"rejected-{n}", stage="verify", reasons=[reason], detail=f"{reason} in record {n}",
                         record={**json.loads(text), "verdicts": [{"code": reason, "passed": False, "severity": "error",
                                                                   "message": REJECTION_MESSAGES[reason], "path": f"messages[{n}].tool_calls[0]"}]})
                for n, ((_, text), reason) in enumerate(zip(dialogue_rows(2, 99, options), REJECTION_MESSAGES))]
    store.write_bytes(f"runs/{run_id}/verify/rejected/part-00000.parquet", _parquet(rejected_table(rejected)))
    store.write_bytes(f"runs/{run_id}/verify/_metrics/part-00000.json", b"{}")
    return written


def modes(records: Sequence[dict[str, Any]]) -> Counter[str]:
    return Counter(r["mode"] for r in records)


class Page(HTMLParser):
    """What a reader of the page gets: images, table cells by table id, notes, and every tag."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.images: list[dict[str, str]] = []
        self.tables: dict[str, list[list[str]]] = {}
        self.notes: list[str] = []
        self.tags: Counter[str] = Counter()
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._note: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        attributes = {k: v or "" for k, v in attrs}
        if tag == "img":
            self.images.append(attributes)
        elif tag == "table":
            self._table = attributes.get("id", "")
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = []
        elif tag == "p" and attributes.get("class") == "note":
            self._note = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            self.tables[self._table][-1].append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._table = None
        elif tag == "p" and self._note is not None:
            self.notes.append("".join(self._note))
            self._note = None

    def handle_data(self, data: str) -> None:
        for sink in (self._cell, self._note):
            if sink is not None:
                sink.append(data)

    def rows(self, table: str) -> list[list[str]]:
        """The table's body rows (its header row left out)."""
        return self.tables[table][1:]


def parse(page: str) -> Page:
    parser = Page()
    parser.feed(page)
    parser.close()
    return parser
