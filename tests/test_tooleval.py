"""ToolEval pass and win rate, judged through the gateway by the simulator."""

from __future__ import annotations

import asyncio
from typing import Any, Iterator

import pytest

from toolfactory.config import load_config
from toolfactory.evaluation.tooleval import (
    check_votes,
    finish_type,
    majority,
    pass_label,
    pass_rate,
    precondition,
    win_label,
    win_rate,
    PassResult,
    WinResult,
)
from toolfactory.llm import Endpoint, LLMGateway
from toolfactory.models import Dialogue, Function, Message, ToolCall
from toolfactory.simulator import SimulatorSettings, start_simulator
from benchmarks.corpus import valid_dialogues

MIRROR = {"win": "lose", "lose": "win", "tie": "tie"}


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    with start_simulator(SimulatorSettings()) as simulator:
        yield simulator


def with_gateway(sim: Any, work: Any) -> Any:
    config = load_config(None, [], environ={})

    async def go() -> Any:
        async with LLMGateway(Endpoint(sim.base_url, "sk-test"), config.llm) as gateway:
            return await work(gateway)

    return asyncio.run(go())


def finishing(return_type: str | None, answer: str | None = None) -> Dialogue:
    messages = [Message(role="user", content="Find a vegan recipe with lentils.")]
    if return_type:
        arguments = f'{{"return_type": "{return_type}", "final_answer": "Lentil curry."}}'
        messages.append(Message(role="assistant", tool_calls=[ToolCall(id="c1", name="Finish", arguments=arguments)]))
    if answer is not None:
        messages.append(Message(role="assistant", content=answer))
    return Dialogue(id="d", task_id="t", tools=[Function(name="Finish", description="end")], messages=messages)


def test_finish_type_follows_finish_calls_then_final_answers() -> None:
    assert finish_type(finishing("give_answer")) == "give_answer"
    assert finish_type(finishing("give_up_and_restart")) == "give_up"
    assert finish_type(finishing(None, "Try a lentil curry.")) == "give_answer"
    assert finish_type(finishing(None, "")) == "give_up"


def test_majority_and_ties() -> None:
    assert majority(["pass", "pass", "fail", "pass"], tie="unsure") == "pass"
    assert majority(["pass", "fail", "fail", "pass"], tie="unsure") == "unsure"
    assert majority([], tie="tie") == "tie"


def test_pass_label_is_the_majority_of_at_least_four_votes(sim: Any) -> None:
    dialogues = valid_dialogues(6, seed=7)
    results = with_gateway(sim, lambda gw: asyncio.gather(*(pass_label(d, gw, votes=5) for d in dialogues)))
    for result in results:
        assert len(result.votes) == 5 and set(result.votes) <= {"pass", "fail", "unsure"}
        assert result.label == majority(result.votes, tie="unsure")
        assert result.finish in {"give_answer", "give_up"}
    summary = pass_rate(results)
    assert summary["paths"] == 6 and summary["pass"] + summary["fail"] + summary["unsure"] == 6


def test_win_votes_swap_positions_so_a_swapped_comparison_mirrors(sim: Any) -> None:
    [a] = valid_dialogues(1, seed=8)
    b = a.model_copy(deep=True)  # another path for the same instruction: a terser final answer
    b.id, b.messages[-1].content = "other", "Done."

    async def both(gw: LLMGateway) -> tuple[WinResult, WinResult]:
        return await win_label(a, b, gw, votes=6), await win_label(b, a, gw, votes=6)

    ab, ba = with_gateway(sim, both)
    # Vote 2k of (a, b) and vote 2k+1 of (b, a) are the same request with the paths in the same
    # places, so each judgement must come out mirrored once mapped back to "the first path".
    for k in range(3):
        assert ab.votes[2 * k] == MIRROR[ba.votes[2 * k + 1]]
        assert ab.votes[2 * k + 1] == MIRROR[ba.votes[2 * k]]
    assert ab.outcome == MIRROR[ba.outcome]


def test_rates_count_ties_as_half_a_win() -> None:
    results = [WinResult("1", "win"), WinResult("2", "tie"), WinResult("3", "lose"), WinResult("4", "win")]
    assert win_rate(results) == {"pairs": 4, "win": 2, "tie": 1, "lose": 1, "not_compared": 0, "by_pass_label": 0,
                                 "win_rate": 0.625}
    passes = [PassResult("1", True, "give_answer", "pass"), PassResult("2", False, "give_up", "fail")]
    assert pass_rate(passes)["pass_rate"] == 0.5


def test_a_path_compared_with_itself_always_ties(sim: Any) -> None:
    """With the order swapped between votes, the judge's position bias cancels exactly."""
    paths = valid_dialogues(4, seed=9)
    results = with_gateway(sim, lambda gw: asyncio.gather(*(win_label(p, p, gw, votes=4) for p in paths)))
    assert all(r.outcome == "tie" for r in results)
    assert win_rate(results)["win_rate"] == 0.5


def test_precondition_a_passing_path_beats_a_failing_one() -> None:
    assert precondition("pass", "fail") == "win"
    assert precondition("fail", "pass") == "lose"
    assert precondition("pass", "pass") is None and precondition("fail", "fail") is None
    assert precondition("unsure", "pass") == "not_compared" and precondition("fail", "unsure") == "not_compared"


def test_win_label_asks_the_judge_only_when_both_paths_pass_or_both_fail(sim: Any) -> None:
    [a] = valid_dialogues(1, seed=10)
    b = a.model_copy(deep=True)
    b.id, b.messages[-1].content = "other", "Done."

    async def compare(gw: LLMGateway) -> list[WinResult]:
        def judge_requests() -> int:
            usage = gw.meter.role("judge")
            return usage.calls + usage.cache_hits

        calls = judge_requests()
        decided = [await win_label(a, b, gw, labels=("pass", "fail")), await win_label(a, b, gw, labels=("fail", "pass")),
                   await win_label(a, b, gw, labels=("unsure", "pass"))]
        assert judge_requests() == calls  # no judge request for a pair the labels decide
        judged = [await win_label(a, b, gw, labels=("pass", "pass")), await win_label(a, b, gw, labels=("fail", "fail"))]
        return decided + judged

    results = with_gateway(sim, compare)
    assert [r.outcome for r in results[:3]] == ["win", "lose", "not_compared"]
    assert all(r.decided_by == "pass_label" and r.votes == [] for r in results[:3])
    assert all(r.decided_by == "judge" and len(r.votes) == 4 for r in results[3:])
    summary = win_rate(results)
    assert summary["not_compared"] == 1 and summary["pairs"] == 4 and summary["by_pass_label"] == 2


def test_fewer_than_four_votes_is_refused_with_one_message(sim: Any) -> None:
    from toolfactory.evaluation.run import evaluate

    paths = valid_dialogues(1, seed=11)
    for votes in (1, 3):
        with pytest.raises(ValueError, match="--votes must be at least 4") as caught:
            check_votes(votes)
        with pytest.raises(ValueError, match="--votes must be at least 4"):
            with_gateway(sim, lambda gw: evaluate(paths, gw, votes))
        assert str(caught.value).count("\n") == 0
    check_votes(4)
