"""The referee: the LLM judges vote on dialogues execution decided (and on labelled corruptions of
them), their votes decide nothing, and the stats hold their agreement with execution; the aspects
execution answers are not voted on where it decided; `check` puts a shipped set to the judge role."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolfactory.config import Config
from toolfactory.llm import Endpoint, LLMGateway
from toolfactory.models import Dialogue, Judgement, Message, ToolCall
from toolfactory.run.floors import below_floors
from toolfactory.run.summary import RunSummary
from toolfactory.simulator import SimulatorSettings, start_simulator
from toolfactory.stages import ShardContext, ShardSpec
from toolfactory.stages.verify.referee import (
    ACCEPTED, ALL, CHANGED_ARGUMENT, CORRUPTIONS, DROPPED_CALL, JUDGED_ALONE, REFEREE, WRONG_ANSWER,
    NOTHING_CAME_BACK, by_origin, corrupt, figures, tally,
)
from toolfactory.stages.verify.stage import VerifyStage

from .test_verify_execution import envs_on_path, recorded, settings  # noqa: F401 - envs_on_path is a fixture

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def lenient_judge() -> Iterator[str]:
    """A simulator whose judges pass everything they are asked about."""
    with start_simulator(SimulatorSettings(boolean_true_rate=1.0)) as sim:
        yield sim.base_url


def executed(n: int, amount: int = 5) -> Dialogue:
    dialogue = recorded([("add", {"amount": amount})])
    dialogue.id = f"d{n}"
    dialogue.messages[0].content = f"Please add {amount} to the counter."
    return dialogue


def verify(dialogues: list[Dialogue], base_url: str, **verify_settings: Any) -> Any:
    environment = settings().model_dump(mode="json", exclude_none=True)
    config = Config.model_validate({"tools": {"environments": [environment]},
                                    "verify": {"judge_votes": 1, **verify_settings}})

    async def run() -> Any:
        async with LLMGateway(Endpoint(base_url, "sk-test"), config.llm) as gateway:
            ctx = ShardContext(config=config, run_id="r", gateway=gateway)
            return await VerifyStage().run(ShardSpec("verify", 0, ("in",)), [d.model_dump() for d in dialogues], ctx)

    return asyncio.run(run())


def test_the_referee_measures_the_judges_against_execution_and_decides_no_record(lenient_judge: str) -> None:
    good = [executed(i) for i in range(3)]
    bad = executed(9, amount=2)
    bad.generation["execution"]["states"]["counter"]["value"] = 0  # the replay will leave 12
    out = verify([*good, bad], lenient_judge, referee_min=10)
    # Decisions are the judges' and execution's as without a referee: the bad one stays rejected by
    # execution alone, although the lenient judges passed it in the referee sample.
    assert sorted(d.id for d in out.records) == ["d0", "d1", "d2"]
    assert [(r.id, r.reasons) for r in out.rejected] == [("d9", ["exec_state_mismatch"])]
    counts = out.profile[REFEREE]
    origins = by_origin(counts)
    assert origins[ACCEPTED] == 3 and origins["exec_state_mismatch"] == 1
    assert sum(origins.get(kind, 0) for kind in CORRUPTIONS) == 3  # one labelled corruption per accepted one
    overall = next(f for f in figures(counts) if f.aspect == ALL)
    # The lenient judge passes everything: it agrees on the three accepted and falsely accepts the rest.
    assert (overall.records, overall.agree, overall.false_accepts, overall.false_rejects) == (7, 3, 4, 0)
    assert {f.aspect for f in figures(counts)} == {ALL, "hallucination", "consistency", "tool_response", "repetition",
                                                   "meaningless_tokens"}
    assert JUDGED_ALONE not in out.profile  # every record here executed


def test_a_sample_share_of_zero_and_no_minimum_turns_the_referee_off(lenient_judge: str) -> None:
    out = verify([executed(0)], lenient_judge, referee_share=0.0, referee_min=0)
    assert REFEREE not in out.profile


def test_no_vote_is_requested_for_an_aspect_execution_answered(lenient_judge: str) -> None:
    both = {"judges": ["tool_response", "consistency"], "judge_call": "per_aspect", "referee_min": 0, "referee_share": 0.0}
    out = verify([executed(0)], lenient_judge, **both)
    assert [j.aspect for j in out.records[0].judgements] == ["consistency"]
    asked_all = verify([executed(0)], lenient_judge, **both, execution_answers=[])
    assert [j.aspect for j in asked_all.records[0].judgements] == ["tool_response", "consistency"]
    # One request per aspect asked: the skipped aspect cost nothing.
    assert sum(out.profile["llm_calls"].values()) == 1 and sum(asked_all.profile["llm_calls"].values()) == 2


def test_a_record_with_a_call_an_llm_played_is_judged_on_every_aspect(lenient_judge: str) -> None:
    dialogue = executed(0)
    played = ToolCall(id="call_x", name="divide", arguments='{"by": 2}')
    dialogue.messages[-1:-1] = [Message(role="assistant", tool_calls=[played]),
                                Message(role="tool", tool_call_id="call_x", name="divide", content='{"value": 7.5}')]
    dialogue.generation["execution"].pop("states")  # no recorded state to hold the played call to
    out = verify([dialogue], lenient_judge, judges=["tool_response"], judge_call="per_aspect", referee_min=0, referee_share=0.0)
    assert [j.aspect for j in out.records[0].judgements] == ["tool_response"]


def test_a_better_judge_agrees_more(tmp_path: Path) -> None:
    dialogues = [executed(i, amount=3 + i) for i in range(6)]
    agreement = {}
    for scrutiny in (0.0, 1.0):
        with start_simulator(SimulatorSettings(boolean_true_rate=0.95, judge_scrutiny=scrutiny)) as sim:
            out = verify(dialogues, sim.base_url, referee_min=10)
        agreement[scrutiny] = next(f for f in figures(out.profile[REFEREE]) if f.aspect == ALL).agreement
    assert agreement[1.0] > agreement[0.0]


def test_the_sample_is_seeded_drawn_by_share_and_topped_up_to_its_minimum() -> None:
    from toolfactory.stages.verify.stage import Sample

    def chosen(seed: int, share: float, minimum: int, ids: list[str]) -> set[str]:
        sample = Sample(seed, share)
        for i in ids:
            sample.consider(Dialogue(id=i, task_id="t", tools=[], messages=[]), ACCEPTED)
        return {d.id for d, _, _ in sample.chosen(minimum)}

    ids = [f"d{i}" for i in range(200)]
    assert chosen(1, 0.1, 3, ids) == chosen(1, 0.1, 3, list(reversed(ids)))  # the order records pass in is no matter
    assert 5 <= len(chosen(1, 0.1, 3, ids)) <= 40 and len(chosen(1, 0.0, 3, ids)) == 3
    assert chosen(1, 0.1, 3, ids) != chosen(2, 0.1, 3, ids)
    assert chosen(1, 0.0, 3, ids[:2]) == set(ids[:2]) and chosen(1, 0.0, 0, ids) == set()


def test_a_drawn_accepted_dialogue_costs_no_referee_request_of_its_own(lenient_judge: str) -> None:
    """Drawn for the referee, an accepted dialogue is asked every aspect by its deciding request:
    with one aspect asked and one answered by execution, that is one request per dialogue in all
    (the corruption's request aside)."""
    out = verify([executed(0)], lenient_judge, judges=["tool_response", "consistency"], judge_call="combined",
                 referee_share=1.0, referee_min=0)
    assert [j.aspect for j in out.records[0].judgements] == ["consistency"]  # the decision reads only what was asked
    assert sum(out.profile["llm_calls"].values()) == 1
    assert by_origin(out.profile[REFEREE])[ACCEPTED] == 1


def test_each_corruption_kind_changes_what_a_reader_checks() -> None:
    dialogue = recorded([("add", {"amount": 5}), ("divide", {"by": 3})])
    dialogue.messages[-1].content = "The counter now holds 5."
    made = {}
    for seed in range(40):
        found = corrupt(dialogue, seed)
        assert found is not None
        made.setdefault(found[0], found[1])
    assert set(made) == set(CORRUPTIONS)
    assert sum(len(m.tool_calls or []) for m in made[DROPPED_CALL].messages) == 1
    assert sum(m.role == "tool" for m in made[DROPPED_CALL].messages) == 1
    changed = [c.arguments for m in made[CHANGED_ARGUMENT].messages for c in m.tool_calls or []]
    assert changed != ['{"amount": 5}', '{"by": 3}'] and len(changed) == 2
    assert made[WRONG_ANSWER].messages[-1].content not in ("The counter now holds 5.",) and \
        "5" not in (made[WRONG_ANSWER].messages[-1].content or "")
    no_numbers = dialogue.model_copy(deep=True)
    no_numbers.messages[-1].content = "Done."
    assert NOTHING_CAME_BACK in [m.content for seed in range(40) if (f := corrupt(no_numbers, seed)) and f[0] == WRONG_ANSWER
                                 for m in f[1].messages]


def test_the_floor_fails_a_run_whose_judges_disagree_with_execution() -> None:
    counts = {**tally("m", ACCEPTED, [Judgement(aspect="consistency", passes=True)]),
              **tally("m", DROPPED_CALL, [Judgement(aspect="consistency", passes=True)])}
    config = Config.model_validate({"verify": {"judge_min_agreement": 0.8}})
    summary = {"stages": [{"stage": "curate", "items_out": 5, "pass_rate": 1.0},
                          {"stage": "verify", "pass_rate": 1.0, "profile": {REFEREE: counts}}]}
    (reason,) = below_floors(config.run, RunSummary.from_dict({"run_id": "r", **summary}), config.verify)
    assert reason.startswith("verify.judge_min_agreement: the judges (m) agreed with execution on 50.0% of 2 refereed")
    assert "1 false accept(s)" in reason
    assert below_floors(config.run, RunSummary.from_dict({"run_id": "r", **summary}), Config().verify) == []  # off by default
    nothing = {"stages": [{"stage": "curate", "items_out": 5, "pass_rate": 1.0}, {"stage": "verify", "profile": {}}]}
    (unknown,) = below_floors(config.run, RunSummary.from_dict({"run_id": "r", **nothing}), config.verify)
    assert "no dialogue was refereed" in unknown


def test_check_puts_the_shipped_referee_set_to_the_judge_role(lenient_judge: str) -> None:
    from toolfactory.preflight.referee import check_judges, referee_set, wanted

    cases = referee_set()
    assert len(cases) == 16 and sum(origin == ACCEPTED for _, origin in cases) == 8
    config = Config.model_validate({"tools": {"environments": [settings().model_dump(mode="json", exclude_none=True)]},
                                    "verify": {"judge_votes": 1}})
    assert wanted(config) and not wanted(Config())
    found = asyncio.run(check_judges(config, Endpoint(lenient_judge, "sk-test")))
    overall = next(f for f in found.figures if f.aspect == ALL)
    assert (overall.records, overall.agree, overall.false_accepts) == (16, 8, 8)
    assert found.lines()[0].startswith("judge referee: sim-small agreed with execution on 8/16")


def test_the_shipped_referee_set_is_what_its_maker_writes() -> None:
    """Each line names its origin and label, and the label is execution's: a ground truth passes,
    a dropped call or a changed argument fails."""
    text = (HERE.parents[1] / "toolfactory" / "catalog" / "referee_set.jsonl").read_text()
    rows = [json.loads(line) for line in text.splitlines()]
    assert all(row["passes"] == (row["origin"] == "ground_truth") for row in rows)
    assert {row["origin"] for row in rows} == {"ground_truth", "dropped_call", "changed_argument"}
    assert all(Dialogue.model_validate(row["dialogue"]).tools for row in rows)


def test_a_strict_judge_in_the_referee_sample_rejects_nothing() -> None:
    """Only tool_response is asked and execution answers it: the accepted records get no vote, and
    the strict judge's failing votes in the referee sample leave them accepted."""
    with start_simulator(SimulatorSettings(boolean_true_rate=0.0)) as sim:
        out = verify([executed(0), executed(1)], sim.base_url, judges=["tool_response"], referee_min=10)
    assert sorted(d.id for d in out.records) == ["d0", "d1"] and not out.rejected
    overall = next(f for f in figures(out.profile[REFEREE]) if f.aspect == ALL)
    assert overall.false_rejects == 2 and overall.false_accepts == 0


def referee_counts() -> dict[str, int]:
    counts: dict[str, int] = {}
    for origin, passes in ((ACCEPTED, True), (ACCEPTED, True), (ACCEPTED, False), (DROPPED_CALL, True), (WRONG_ANSWER, False)):
        for value, n in tally("judge-m", origin, [Judgement(aspect="consistency", passes=passes)]).items():
            counts[value] = counts.get(value, 0) + n
    return counts


def test_the_report_and_the_card_show_the_referee_figures_and_the_expected_error() -> None:
    from toolfactory.export.card import judges
    from toolfactory.export.stats import ExportStats
    from toolfactory.report.data import DialogueMix, RunStats, StageNumbers, Usage
    from toolfactory.report.sections import sections

    counts = referee_counts()
    verify_stage = StageNumbers("verify", 1, 1, 0, 10, 8, 2, 0.8, {}, (),
                                {REFEREE: counts, JUDGED_ALONE: {"accepted": 18, "rejected": 2}}, Usage())
    shown = next(s for s in sections(RunStats("r", "completed", None, None, (verify_stage,), {}), DialogueMix()) if s.id == "referee")
    assert shown.tables[0].rows[0] == ("judge-m", "every aspect", "5", "60.0%", "1", "1")
    assert "alone decided 20 record(s)" in shown.notes[0] and "about 8.0 of those" in shown.notes[0]
    card = judges(ExportStats(splits=("train",), referee=counts, judged_alone={"accepted": 18, "rejected": 2}))
    assert "| judge-m | every aspect | 5 | 60.0% | 1 | 1 |" in card and "about 8.0 of those decisions" in card
    assert "No dialogue of the run was refereed" in judges(ExportStats(splits=("train",)))
    nothing = next(s for s in sections(RunStats("r", "completed", None, None, (), {}), DialogueMix()) if s.id == "referee")
    assert not nothing.tables and "No dialogue of this run was refereed" in nothing.notes[0]
