"""What the report shows of a run that recorded little: notes instead of empty charts."""

from __future__ import annotations

from toolfactory.report.data import DialogueMix, Layer, RunStats, StageNumbers, Usage
from toolfactory.report.sections import sections


def stage(name: str, items_in: int, items_out: int, usage: Usage = Usage(), **profile: dict[str, int]) -> StageNumbers:
    return StageNumbers(name, 1, 1, 0, items_in, items_out, 0, 1.0 if items_out else None, {},
                        (Layer("rules", items_in, items_out),) if name == "verify" else (), dict(profile), usage)


def test_a_run_without_rejections_profiles_or_llm_use_shows_notes() -> None:
    stats = RunStats("r", "completed", None, None, (stage("tools", 3, 3), stage("verify", 0, 0)), {})
    shown = {s.id: s for s in sections(stats, DialogueMix())}
    assert [c.file for s in shown.values() for c in s.charts] == ["funnel.png"]
    assert shown["rejections"].notes == ("No stage rejected a record: chart omitted.",)
    assert len(shown["coverage"].notes) == 2  # no domains profile, no pool size
    assert shown["llm"].notes == ("The run recorded no LLM use: charts omitted.",)
    llm = {t.id: t for t in shown["llm"].tables}["llm-stages"]
    assert llm.rows[-1] == ("total", "0", "0", "0", "0", "0", "-", "-")  # no accepted record to divide by


def test_llm_use_without_roles_draws_stages_and_notes_the_roles() -> None:
    stats = RunStats("r", "completed", None, None, (stage("verify", 4, 2, Usage(6, 2, 600, 60)),), {})
    llm = next(s for s in sections(stats, DialogueMix()) if s.id == "llm")
    assert [c.file for c in llm.charts] == ["llm_stages.png"]
    assert llm.notes == ("No per-role LLM use was recorded: role chart omitted.",)
    assert llm.tables[0].rows[0] == ("verify", "6", "2", "600", "0", "60", "3.00", "330.00")


def test_llm_use_shows_the_prompt_tokens_the_endpoint_served_from_its_cache() -> None:
    stats = RunStats("r", "completed", None, None, (stage("verify", 4, 2, Usage(6, 2, 1600, 60, 1280)),), {})
    llm = next(s for s in sections(stats, DialogueMix()) if s.id == "llm")
    assert llm.tables[0].header[3:5] == ("prompt tokens", "of which cached")
    assert llm.tables[0].rows[0][3:5] == ("1,600", "1,280")


def test_llm_use_shows_requests_per_accepted_dialogue_of_each_recipe() -> None:
    stats = RunStats("r", "completed", None, None, (stage("verify", 4, 2, Usage(6, 2, 600, 60)),), {},
                     calls_by_recipe={"toolace": (2, 31), "toolllm": (0, 12)})
    llm = next(s for s in sections(stats, DialogueMix()) if s.id == "llm")
    recipes = {t.id: t for t in llm.tables}["llm-recipes"]
    assert recipes.header == ("recipe", "accepted", "requests", "requests per accepted")
    assert recipes.rows == (("toolace", "2", "31", "15.50"), ("toolllm", "0", "12", "-"))


def test_executed_tools_show_per_source_the_dialogues_calls_errors_and_those_in_the_dataset() -> None:
    tools = stage("tools", 2, 2, vetted_functions={"time: works": 2, "files: works": 5, "files: errors (refused)": 1},
                  warm_sessions={"time: reset keeps sessions apart": 1, "files: a new process per session": 1})
    made = stage("dialogues", 6, 5, executed_dialogues_by_source={"time": 4, "files": 1},
                 executed_calls_by_source={"time": 9, "files": 2}, executed_errors_by_source={"time": 2, "files": 0},
                 sessions_started_by_source={"time": 1, "files": 1}, sessions_reused_by_source={"time": 3})
    checked = stage("verify", 5, 5, sessions_reused_by_source={"time": 4}, sessions_started_by_source={"files": 1})
    kept = stage("curate", 5, 4, executed_dialogues_by_source={"time": 3}, executed_dialogues_any_source={"any": 3})
    stats = RunStats("r", "completed", None, None, (tools, made, checked, kept), {})
    executed = next(s for s in sections(stats, DialogueMix()) if s.id == "executed")
    assert executed.tables[0].rows == (("files", "1", "2", "0", "0", "0.0%", "2", "0"), ("time", "4", "9", "2", "3", "75.0%", "1", "7"))
    assert executed.notes[0] == "3 of 4 accepted dialogues (75.0%) ran at least one real tool."
    assert executed.notes[1] == "10 sessions from 3 process starts: 2.3 reused per start."
    assert executed.tables[1].header == ("source", "errors (refused)", "works", "sessions")
    assert executed.tables[1].rows == (("files", "1", "5", "a new process per session"), ("time", "0", "2", "reset keeps sessions apart"))


def test_a_run_without_executable_sources_says_every_tool_response_was_played() -> None:
    stats = RunStats("r", "completed", None, None, (stage("dialogues", 2, 2), stage("curate", 2, 2)), {})
    executed = next(s for s in sections(stats, DialogueMix()) if s.id == "executed")
    assert not executed.tables and "played by an LLM" in executed.notes[0]


def test_decontamination_shows_the_sets_checked_their_items_rejections_and_thresholds() -> None:
    select = stage("select", 5, 3, contamination_sets={"bfcl": 4696, "mybench": 3},
                   contamination_skipped={"toolbench: the shipped index has no toolbench.jsonl.gz": 1},
                   contamination_settings={"ngram words": 13, "min words": 8, "ordered similarity %": 50,
                                           "bag similarity %": 80, "tools similarity %": 60})
    curate = StageNumbers("curate", 1, 1, 0, 5, 3, 2, 0.6, {"contaminated_bfcl": 2}, (), {"contaminated": {"bfcl: exact": 1, "bfcl: bag": 1}}, Usage())
    shown = next(s for s in sections(RunStats("r", "completed", None, None, (select, curate), {}), DialogueMix()) if s.id == "decontamination")
    assert shown.tables[0].rows == (("bfcl", "4,696", "2", "exact 1, bag 1"), ("mybench", "3", "0", "-"))
    assert shown.tables[0].caption.startswith("5 dialogues checked")
    assert shown.notes[0] == "toolbench was not checked: the shipped index has no toolbench.jsonl.gz."
    assert "a shared run of 13 words" in shown.notes[1] and "of word sets at least 0.80" in shown.notes[1]


def test_a_run_not_decontaminated_says_so() -> None:
    stats = RunStats("r", "completed", None, None, (stage("select", 2, 2), stage("curate", 2, 2)), {})
    shown = next(s for s in sections(stats, DialogueMix()) if s.id == "decontamination")
    assert not shown.tables and "not checked against any evaluation set" in shown.notes[0]


def test_turn_masks_show_the_masked_assistant_turns_by_reason() -> None:
    curate = stage("curate", 4, 4, assistant_turns={"trained": 6, "masked": 4},
                   turn_masks={"error_recovered": 1, "flagged_arg_value_ungrounded": 3})
    shown = next(s for s in sections(RunStats("r", "completed", None, None, (curate,), {}), DialogueMix()) if s.id == "turn-masks")
    assert shown.tables[0].rows == (("flagged_arg_value_ungrounded", "3", "30.0%"), ("error_recovered", "1", "10.0%"))
    assert shown.tables[0].caption.startswith("4 of 10 assistant turns")
    unrecorded = next(s for s in sections(RunStats("r", "completed", None, None, (stage("curate", 2, 2),), {}), DialogueMix())
                      if s.id == "turn-masks")
    assert not unrecorded.tables and "no turn masks" in unrecorded.notes[0]
