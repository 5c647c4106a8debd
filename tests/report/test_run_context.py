"""What the report shows beside the stage numbers: config and models, the simulator warning,
time and cost per stage, sample dialogues as chats, rejected examples with the rule's message,
links to the exports, the trend against earlier runs of the root, and for a failed run its
failed shards and the command that finishes it."""

from __future__ import annotations

import html
import re
from pathlib import Path

from toolfactory.report import build_report, report_dir
from toolfactory.report.context import Price, RunContext

from .conftest import Built
from .helpers import EARLIER, EXPORT_FILES, REJECTION_MESSAGES, RUN, open_store, parse, write_dialogues, write_run_files


def test_config_and_models_come_from_the_manifest(built: Built) -> None:
    settings = dict(built.page.rows("config"))
    assert settings["LLM provider"] == "simulator" and settings["storage root"] == built.store.url
    models = {row[0]: row[1:] for row in built.page.rows("models")}
    assert models["judge"] == ["model-judge", "$2 / $8"] and set(models) == {"user", "assistant", "tool", "judge", "designer", "target"}


def test_the_preflight_checks_and_the_modes_chosen_for_auto_are_shown(tmp_path: Path, stats_path: Path) -> None:
    probe = {"role": "assistant", "model": "model-assistant", "capability": "tool calling", "cached": False}
    preflight = {"endpoint": "http://127.0.0.1:9/v1", "choices": {"llm.roles.assistant.tool_calling": "text"}, "probes": [
        {**probe, "mode": "native", "status": "unsupported", "latency_s": 0.12, "detail": '"auto" tool choice requires --enable-auto-tool-choice'},
        {**probe, "mode": "text", "status": "ok", "latency_s": 0.34, "detail": "get_weather"},
    ]}
    store = open_store(tmp_path / "store")
    write_dialogues(store, (3,))
    write_run_files(store, provider="openai-compatible", preflight=preflight)
    page = parse(store.read_bytes(build_report(store, stats_path, RUN)["index"]).decode())
    assert page.rows("preflight-choices") == [["llm.roles.assistant.tool_calling", "text"]]
    native, text = page.rows("preflight")
    assert native[:5] == ["assistant", "model-assistant", "tool calling", "native", "unsupported"]
    assert "enable-auto-tool-choice" in native[6] and text[4:] == ["ok", "0.34 s", ""]


def test_a_sampling_parameter_the_endpoint_refused_is_shown_left_out(tmp_path: Path, stats_path: Path) -> None:
    preflight = {"endpoint": "http://127.0.0.1:9/v1", "probes": [
        {"role": "judge", "model": "o4-mini", "capability": "chat", "mode": "max_completion_tokens, no temperature",
         "status": "ok", "latency_s": 0.2, "cached": False, "detail": "answered 40 characters"}],
        "choices": {"llm.roles.judge.max_tokens_parameter": "max_completion_tokens", "llm.roles.judge.temperature": None}}
    store = open_store(tmp_path / "store")
    write_dialogues(store, (3,))
    write_run_files(store, provider="openai-compatible", preflight=preflight)
    page = parse(store.read_bytes(build_report(store, stats_path, RUN)["index"]).decode())
    assert page.rows("preflight-choices") == [["llm.roles.judge.max_tokens_parameter", "max_completion_tokens"],
                                              ["llm.roles.judge.temperature", "null (left out: the endpoint's default applies)"]]


def test_a_run_without_preflight_probes_shows_no_preflight_table(built: Built) -> None:
    assert "preflight" not in built.page.tables


def test_a_simulated_run_opens_with_the_warning(built: Built) -> None:
    warning = re.search(r'<p class="warning" id="warning">(.*?)</p>', built.html)
    assert warning and "offline simulator" in warning.group(1)
    assert built.html.index('id="warning"') < built.html.index("<nav>")


def test_a_run_on_a_real_endpoint_has_no_warning(tmp_path: Path, stats_path: Path) -> None:
    store = open_store(tmp_path / "store")
    write_dialogues(store, (3,))
    write_run_files(store, provider="openai-compatible")
    result = build_report(store, stats_path, RUN)
    page = store.read_bytes(result["index"]).decode()
    assert 'id="warning"' not in page and "openai-compatible" in page


def test_time_and_cost_per_stage(built: Built) -> None:
    rows = {row[0]: row[1:] for row in built.page.rows("time-cost")}
    assert rows["tools"][:3] == ["2", "10.0 s", "5.0 s"]  # two shards of 5 s that ran side by side
    # verify: the judge's 2 x (6,400 prompt + 800 completion) tokens at $2 and $8 per million
    assert rows["verify"][3:] == ["14,400", "0.0384"]
    assert built.page.tables["time-cost"][0][-1] == "cost (USD)"


def test_cost_per_role_and_for_the_run(built: Built) -> None:
    rows = {row[0]: row[1:] for row in built.page.rows("cost-role")}
    assert rows["judge"][2] == "0.0384"  # the judge is verify's only role
    total = sum(float(cost) for role, (_, _, cost) in rows.items() if role != "run")
    assert float(rows["run"][2]) == round(total, 4) and set(rows) >= {"judge", "run"}


def test_without_prices_cost_is_tokens_with_a_note(tmp_path: Path, stats_path: Path) -> None:
    store = open_store(tmp_path / "store")
    write_dialogues(store, (3,))
    page = parse(store.read_bytes(build_report(store, stats_path, RUN)["index"]).decode())
    assert page.tables["time-cost"][0] == ["stage", "shards", "busy time", "elapsed", "tokens"]
    assert any(note.startswith("No price is configured") for note in page.notes)


def test_one_sample_chat_per_recipe_and_mode_with_readable_calls(built: Built) -> None:
    kinds = {(r["recipe"], r["mode"]) for r in built.records}
    chats = re.findall(r'<article class="chat">(.*?)</article>', built.html, re.S)
    assert len(chats) == len(kinds)
    first = next(r for r in built.records if any(m.get("tool_calls") for m in r["messages"]))
    chat = next(c for c in chats if html.escape(first["id"]) in c)
    for call in (c for m in first["messages"] for c in m.get("tool_calls") or []):
        assert f"calls <code>{html.escape(call['name'])}</code>" in chat
    assert 'class="turn tool"' in chat and 'class="turn user"' in chat


def test_rejected_examples_show_the_rule_message_and_path(built: Built) -> None:
    rows = built.page.rows("rejected-examples")
    row = next(r for r in rows if r[1] == "call_unknown_function")
    assert row == ["verify", "call_unknown_function", "3", "rejected-0", REJECTION_MESSAGES["call_unknown_function"],
                   "messages[0].tool_calls[0]"]


def test_exports_are_linked_relative_to_the_report(built: Built) -> None:
    hrefs = re.findall(r'<ul class="links">(.*?)</ul>', built.html, re.S)[0]
    links = re.findall(r'href="([^"]+)"', hrefs)
    assert sorted(links) == sorted(f"../export/{name}" for name in EXPORT_FILES)
    index = Path(built.result["uri"])
    assert all((index.parent / link).resolve().is_file() for link in links)


def test_trend_lists_the_earlier_run_of_the_root_then_this_one(built: Built) -> None:
    rows = built.page.rows("trend")
    assert [r[0] for r in rows] == [EARLIER, f"{RUN} (this run)"]
    assert [r[3] for r in rows] == ["14", "14"]
    assert any(image["src"] == "trend.png" for image in built.page.images)


def test_a_failed_run_lists_its_failed_shards_and_the_rerun_command(built: Built) -> None:
    assert built.page.rows("failed-shards") == [["dialogues", "1", "failed", "2 of 18 records failed on transient LLM errors"]]
    commands = [html.unescape(c) for c in re.findall(r"<pre><code>(.*?)</code></pre>", built.html, re.S)]
    assert commands == [f"toolfactory rerun {RUN} --set storage.root={built.store.url}"]
    assert built.html.index('id="failed"') < built.html.index('id="funnel"')


def test_the_report_folder_holds_only_the_page_and_its_charts(built: Built) -> None:
    listed = built.store.list(f"{report_dir(RUN)}/")
    assert sorted(listed) == sorted([*built.result["charts"], built.result["index"]])


def test_a_format_of_many_files_is_linked_by_folder(tmp_path: Path, stats_path: Path) -> None:
    store = open_store(tmp_path / "store")
    write_dialogues(store, (3,))
    for n in range(30):
        store.write_bytes(f"runs/{RUN}/export/toolbench/answer/train/{n}_CoT@1.json", b"{}")
    store.write_bytes(f"runs/{RUN}/export/toolbench/toolllama/train.json", b"[]")
    page = store.read_bytes(build_report(store, stats_path, RUN)["index"]).decode()
    links = re.findall(r'<ul class="links">(.*?)</ul>', page, re.S)[0]
    assert re.findall(r'href="([^"]+)"', links) == ["../export/toolbench/answer/train/", "../export/toolbench/toolllama/"]
    assert "toolbench: answer/train/ (30 files)" in links


def test_cached_prompt_tokens_cost_the_roles_cached_price_in_the_report() -> None:
    context = RunContext(prices={"judge": Price(prompt=2.0, completion=8.0, cached=0.5), "user": Price(2.0, 8.0)})
    context.stage_role_tokens = {("verify", "judge"): (1_000_000, 0), ("tasks", "user"): (1_000_000, 0)}
    context.stage_role_cached = {("verify", "judge"): 800_000, ("tasks", "user"): 800_000}
    assert context.role_cost("judge") == 0.2 * 2.0 + 0.8 * 0.5
    assert context.cost("verify") == context.role_cost("judge")
    assert context.role_cost("user") == 2.0  # no cached price: cached tokens cost the prompt price
