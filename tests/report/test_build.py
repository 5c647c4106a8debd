"""The report of a small real run: files, the page's numbers against the stats, escaping,
and charts left out (with a note) when the records lack what they show."""

from __future__ import annotations

import re

import struct
from pathlib import Path

import pytest

from toolfactory.report import ReportError, build_report, report_dir
from toolfactory.stages import STAGE_NAMES
from toolfactory.run.stats import StatsDB

from .conftest import Built, Rebuilt
from .helpers import EVIL, ROLES, RUN, modes, open_store, parse

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ALL_CHARTS = {"funnel.png", "rejections.png", "mix.png", "target_vs_shown.png", "complexity.png", "domains.png",
              "coverage.png", "clusters.png", "llm_stages.png", "llm_roles.png", "trend.png"}


def number(cell: str) -> int:
    return int(cell.replace(",", ""))


def test_result_names_the_index_its_uri_and_every_chart(built: Built) -> None:
    folder = report_dir(RUN)
    assert built.result["index"] == f"{folder}/index.html"
    assert built.result["uri"] == built.store.uri(f"{folder}/index.html")
    assert Path(built.result["uri"]).is_file()
    assert {path.removeprefix(f"{folder}/") for path in built.result["charts"]} == ALL_CHARTS
    assert sorted(built.store.list(f"{folder}/")) == sorted([*built.result["charts"], built.result["index"]])


def test_every_image_on_the_page_is_a_real_png_next_to_it(built: Built) -> None:
    sources = [image["src"] for image in built.page.images]
    assert sorted(sources) == sorted(ALL_CHARTS)
    for image in built.page.images:
        data = built.store.read_bytes(f"{report_dir(RUN)}/{image['src']}")
        assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
        width, height = struct.unpack(">II", data[16:24])
        assert width >= 300 and height >= 150
        assert len(data) > 5_000
        assert image["alt"].strip()


def test_funnel_table_shows_the_stats_of_each_stage(built: Built) -> None:
    summary = StatsDB(built.stats_path).run_summary(RUN, STAGE_NAMES)
    rows = built.page.rows("funnel")
    # The fixture's run failed at verify: the stages after it recorded nothing and are not shown.
    assert [row[0] for row in rows] == [s.stage for s in summary.stages] == list(STAGE_NAMES[: STAGE_NAMES.index("verify") + 1])
    for row, stage in zip(rows, summary.stages):
        assert row[1] == f"{stage.shards_completed}/{stage.shards_total}"
        assert [number(c) for c in row[2:6]] == [stage.shards_failed, stage.items_in, stage.items_out, stage.rejected]
        assert row[6] == f"{stage.pass_rate:.1%}"
    # and what the test run wrote (guards against a bug shared by the stats and the page)
    by_stage = {row[0]: row for row in rows}
    assert by_stage["dialogues"][1:3] == ["1/2", "1"]
    assert by_stage["verify"][3:] == ["18", "14", "4", "77.8%"]


def test_layers_table_shows_verify_rules_then_model(built: Built) -> None:
    assert built.page.rows("layers") == [
        ["verify · rules", "18", "16", "88.9%"],
        ["verify · model", "16", "14", "87.5%"],
    ]


def test_rejections_table_shows_reasons_per_stage(built: Built) -> None:
    summary = StatsDB(built.stats_path).run_summary(RUN, STAGE_NAMES)
    expected = [[s.stage, reason, str(n)] for s in summary.stages for reason, n in s.rejections.items()]
    assert built.page.rows("rejections") == expected
    assert ["verify", "call_unknown_function", "3"] in expected


def test_mix_table_counts_the_accepted_records(built: Built) -> None:
    shown = {row[1]: number(row[2]) for row in built.page.rows("mix") if row[0] == "mode"}
    assert shown == dict(modes(built.records))
    recipes = {row[1]: number(row[2]) for row in built.page.rows("mix") if row[0] == "recipe"}
    assert sum(recipes.values()) == len(built.records) == 14


def test_coverage_table_compares_uses_with_the_pool(built: Built) -> None:
    used = {tool["id"] for record in built.records for tool in record["source_tools"]}
    assert built.page.rows("coverage") == [
        ["tools", "in the pool", "40", "100.0%"],
        ["tools", "offered by tasks", "12", "30.0%"],
        ["tools", "in accepted dialogues", str(len(used)), f"{len(used) / 40:.1%}"],
        ["APIs", "in the pool", "36", "100.0%"],
        ["APIs", "offered by tasks", "18", "50.0%"],
    ]


def test_llm_tables_count_every_attempt_per_accepted_record(built: Built) -> None:
    shards = {"domains": 1, "tools": 2, "tasks": 2, "dialogues": 2, "verify": 2}  # the failed dialogues shard too
    stages = {row[0]: row for row in built.page.rows("llm-stages")}
    for stage, roles in ROLES.items():
        calls = sum(r[0] for r in roles.values()) * shards[stage]
        tokens = sum(r[2] + r[3] for r in roles.values()) * shards[stage]
        assert number(stages[stage][1]) == calls
        assert stages[stage][6:] == [f"{calls / 14:,.2f}", f"{tokens / 14:,.2f}"]
    roles = {row[0]: number(row[1]) for row in built.page.rows("llm-roles")}
    assert roles == {"assistant": 60, "designer": 23, "judge": 32, "tool": 40, "user": 40, "total": 195}
    assert number(stages["total"][1]) == 195


def test_strings_from_data_are_escaped(built: Built) -> None:
    assert "<script" not in built.html.lower()
    assert built.page.tags["script"] == 0
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in built.html
    for table in ("rejections", "mix", "domains", "clusters"):
        assert any(EVIL in row for row in built.page.rows(table)), table


def test_page_is_self_contained(built: Built) -> None:
    # no resource from elsewhere (URLs inside sample dialogues are text)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", built.html)
    assert built.page.tags["link"] == 0 and built.page.tags["style"] == 1
    assert all("/" not in image["src"] for image in built.page.images)


def test_present_fields_have_no_note(built: Built) -> None:
    # The three notes say that this run's tools were all played by an LLM (it had no executable
    # source), so no dialogue could be refereed, and that it failed before the select stage, so
    # nothing was decontaminated: facts of the run, not fields missing from it.
    facts = ("played by an LLM", "No dialogue of this run was refereed", "No dialogue reached the select stage")
    assert [note for note in built.page.notes if not any(fact in note for fact in facts)] == []
    assert len(built.page.notes) == 3


def test_charts_of_absent_fields_are_omitted_with_a_note(rebuilt: Rebuilt) -> None:
    page = rebuilt.second.page
    omitted = {"complexity.png", "clusters.png", "target_vs_shown.png", "trend.png"}  # trend: no earlier run
    assert {image["src"] for image in page.images} == ALL_CHARTS - omitted
    for field in ("complexity field", "cluster field", "(target_mode)"):
        assert sum(field in note for note in page.notes) == 1, field
    assert {"complexity", "clusters", "target-vs-shown"}.isdisjoint(page.tables)


def test_rebuild_replaces_the_page_and_deletes_charts_it_no_longer_shows(rebuilt: Rebuilt) -> None:
    store, first, second = rebuilt.second.store, rebuilt.first.result, rebuilt.second.result
    gone = {f"{report_dir(RUN)}/{name}" for name in ("complexity.png", "clusters.png", "target_vs_shown.png")}
    assert gone <= set(first["charts"]) and gone.isdisjoint(second["charts"])
    assert sorted(store.list(f"{report_dir(RUN)}/")) == sorted([*second["charts"], second["index"]])
    assert rebuilt.first.html != rebuilt.second.html


def test_run_without_accepted_dialogues_still_has_its_stage_report(tmp_path: Path, stats_path: Path) -> None:
    store = open_store(tmp_path / "store")
    result = build_report(store, stats_path, RUN)
    page = parse(store.read_bytes(result["index"]).decode())
    sources = {image["src"] for image in page.images}
    assert {"funnel.png", "rejections.png", "coverage.png", "llm_stages.png"} <= sources
    assert sources.isdisjoint({"mix.png", "complexity.png", "clusters.png"})
    assert any("no accepted dialogues" in note for note in page.notes)
    assert [row[1] for row in page.rows("coverage") if row[0] == "tools"] == ["in the pool", "offered by tasks"]


def test_unknown_run_or_missing_stats_raise_and_write_nothing(tmp_path: Path, stats_path: Path) -> None:
    store = open_store(tmp_path / "store")
    with pytest.raises(ReportError, match="no stats database"):
        build_report(store, tmp_path / "missing.duckdb", RUN)
    with pytest.raises(ReportError, match="'other-run' is not in the stats database"):
        build_report(store, stats_path, "other-run")
    assert store.list("runs/") == []
