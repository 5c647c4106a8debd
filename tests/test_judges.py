"""The model layer of the verify stage: LLM judges through the gateway, against the simulator."""

from __future__ import annotations

import asyncio
from typing import Any, Iterator

import pytest

from conftest import http
from toolfactory.config import load_config
from toolfactory.llm import Endpoint, LLMGateway
from toolfactory.models import Dialogue
from toolfactory.simulator import SimulatorSettings, start_simulator
from toolfactory.stages import ShardContext, ShardSpec, StageOutput
from benchmarks.corpus import valid_dialogues
from toolfactory.stages.verify.corruption import corrupt
from toolfactory.stages.verify.judges import first_wave
from toolfactory.stages.verify.stage import VerifyStage

PER_ASPECT = "verify.judge_call=per_aspect"


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    with start_simulator(SimulatorSettings()) as simulator:
        yield simulator


def verify(sim: Any, dialogues: list[Dialogue], true_rate: float, *overrides: str) -> tuple[StageOutput, Any]:
    http.post(f"{sim.root_url}/simulator/settings", json={"boolean_true_rate": true_rate}).raise_for_status()
    config = load_config(None, list(overrides), environ={})

    async def go() -> tuple[StageOutput, Any]:
        async with LLMGateway(Endpoint(sim.base_url, "sk-test"), config.llm) as gateway:
            ctx = ShardContext(config=config, run_id="r", gateway=gateway)
            out = await VerifyStage().run(ShardSpec("verify", 0, ()), [d.model_dump() for d in dialogues], ctx)
            return out, gateway.meter

    return asyncio.run(go())


def test_passing_judges_accept_and_keep_every_vote(sim: Any) -> None:
    dialogues = valid_dialogues(6, seed=1)
    out, meter = verify(sim, dialogues, 1.0, PER_ASPECT, "verify.judge_stop=all")
    assert len(out.records) == 6 and not out.rejected
    for record in out.records:
        assert [j.aspect for j in record.judgements] == [  # type: ignore[attr-defined]
            "hallucination", "consistency", "tool_response", "repetition", "meaningless_tokens"
        ]
        assert all(j.passes and len(j.votes) == 3 and all(v.reason for v in j.votes) for j in record.judgements)  # type: ignore[attr-defined]
    # The first two votes of an aspect are one request with two choices; the third is its own.
    assert meter.role("judge").calls + meter.role("judge").cache_hits == 6 * 5 * 2
    assert out.layers == {"rules": (6, 6), "model": (6, 6)}


def test_votes_stop_once_the_majority_is_decided(sim: Any) -> None:
    out, meter = verify(sim, valid_dialogues(6, seed=1), 1.0, PER_ASPECT)
    assert len(out.records) == 6
    # Two passing votes of three decide: the third is never asked.
    assert all(j.passes and len(j.votes) == 2 for r in out.records for j in r.judgements)  # type: ignore[attr-defined]
    # Both votes came from one request with two choices.
    assert meter.role("judge").calls + meter.role("judge").cache_hits == 6 * 5
    assert out.profile["llm_calls"] == {"verifier-corpus": 6 * 5}  # the requests, per recipe


def _decisions(out: StageOutput) -> dict[str, dict[str, bool]]:
    judged = [*out.records, *(Dialogue.model_validate(r.record) for r in out.rejected)]
    return {d.id: {j.aspect: j.passes for j in d.judgements} for d in judged}  # type: ignore[attr-defined]


@pytest.mark.parametrize("votes", [3, 4, 5])
def test_stopping_early_decides_as_every_vote_would(sim: Any, votes: int) -> None:
    dialogues = valid_dialogues(10, seed=7)
    every, every_meter = verify(sim, dialogues, 0.5, PER_ASPECT, f"verify.judge_votes={votes}", "verify.judge_stop=all")
    early, early_meter = verify(sim, dialogues, 0.5, PER_ASPECT, f"verify.judge_votes={votes}")
    assert _decisions(early) == _decisions(every)
    assert {r.id for r in early.records} == {r.id for r in every.records}
    requests = early_meter.role("judge").calls + early_meter.role("judge").cache_hits
    every_requests = 10 * 5 * (votes - first_wave(votes) + 1)  # the first wave is one request
    assert requests < every_requests == every_meter.role("judge").calls + every_meter.role("judge").cache_hits


def test_one_combined_request_per_vote_answers_every_aspect(sim: Any) -> None:
    out, meter = verify(sim, valid_dialogues(4, seed=1), 1.0)  # the default
    assert len(out.records) == 4
    for record in out.records:
        assert [j.aspect for j in record.judgements] == [  # type: ignore[attr-defined]
            "hallucination", "consistency", "tool_response", "repetition", "meaningless_tokens"
        ]
        assert all(j.passes and len(j.votes) == 2 and all(v.reason for v in j.votes) for j in record.judgements)  # type: ignore[attr-defined]
    assert meter.role("judge").calls + meter.role("judge").cache_hits == 4  # both votes: one request, two choices


@pytest.mark.parametrize("votes", [3, 4])
def test_votes_asked_as_choices_of_one_request_decide_as_votes_asked_one_by_one(sim: Any, votes: int) -> None:
    dialogues = valid_dialogues(10, seed=7)
    grouped, grouped_meter = verify(sim, dialogues, 0.5, f"verify.judge_votes={votes}")
    alone, alone_meter = verify(sim, dialogues, 0.5, f"verify.judge_votes={votes}", "llm.multiple_choices=false")
    assert _decisions(grouped) == _decisions(alone)
    assert grouped_meter.role("judge").calls < alone_meter.role("judge").calls
    # The prompt is read once for the choices of one request.
    assert grouped_meter.role("judge").prompt_tokens < alone_meter.role("judge").prompt_tokens


def test_a_combined_judge_rejects_with_every_failed_aspect(sim: Any) -> None:
    out, _ = verify(sim, valid_dialogues(3, seed=2), 0.0, "verify.judge_call=combined", "verify.judges=[consistency,repetition]")
    assert not out.records
    assert out.rejections() == {"judge_consistency": 3, "judge_repetition": 3}


def test_failing_judges_reject_with_an_aspect_code_and_their_reasons(sim: Any) -> None:
    out, _ = verify(sim, valid_dialogues(4, seed=2), 0.0, "verify.judges=[consistency]", "verify.judge_votes=1")
    assert not out.records
    assert out.rejections() == {"judge_consistency": 4}
    judged = Dialogue.model_validate(out.rejected[0].record)
    assert [j.aspect for j in judged.judgements] == ["consistency"] and not judged.judgements[0].passes
    assert out.layers == {"rules": (4, 4), "model": (4, 0)}


def test_the_majority_decides_and_a_tie_fails(sim: Any) -> None:
    out, _ = verify(sim, valid_dialogues(12, seed=3), 0.5, PER_ASPECT, "verify.judge_votes=4")
    judgements = [j for r in out.records for j in r.judgements] + [  # type: ignore[attr-defined]
        j for rejected in out.rejected for j in Dialogue.model_validate(rejected.record).judgements
    ]
    assert len(judgements) == 12 * 5
    assert all(j.passes == (sum(v.passes for v in j.votes) >= 3) for j in judgements)
    assert any(sum(v.passes for v in j.votes) == 2 and not j.passes for j in judgements)  # a 2–2 tie


def test_records_the_rules_reject_cost_no_judge_call(sim: Any) -> None:
    broken = [c.dialogue for d in valid_dialogues(5, seed=4) if (c := corrupt(d, "unknown_function")) is not None]
    assert broken
    out, meter = verify(sim, broken, 1.0)
    assert len(out.rejected) == len(broken) and all("call_unknown_function" in r.reasons for r in out.rejected)
    assert meter.role("judge").calls == meter.role("judge").cache_hits == 0
    assert out.layers["model"] == (0, 0)


def test_judges_can_be_turned_off(sim: Any) -> None:
    out, meter = verify(sim, valid_dialogues(3, seed=5), 0.0, "verify.judges=[]")
    assert len(out.records) == 3 and out.layers == {"rules": (3, 3)}
    assert meter.role("judge").calls == 0


def test_judge_benchmark_pairs_are_labelled_by_construction() -> None:
    import json

    from toolfactory.stages.verify.grounding import FABRICATED, labelled_pair

    pairs = [p for d in valid_dialogues(20, seed=11) if (p := labelled_pair(d))]
    assert len(pairs) >= 10
    for grounded, hallucinated in pairs:
        said = " ".join(m.content or "" for m in grounded.messages if m.role in ("user", "system"))
        for message in grounded.messages:
            for call in message.tool_calls or []:
                for value in json.loads(call.arguments).values():
                    assert json.dumps(value) in said  # every value the calls use was stated
        calls = [c.arguments for m in hallucinated.messages for c in m.tool_calls or []]
        assert sum(FABRICATED in a for a in calls) == 1
        assert all(FABRICATED not in (m.content or "") for m in hallucinated.messages)


def test_a_dialogues_judges_find_their_shared_beginning_in_the_endpoints_prompt_cache(sim: Any) -> None:
    # Answers take 50 ms: requests sent together would all be prefilled in full.
    http.post(f"{sim.root_url}/simulator/settings", json={"profile": "vllm-hermes", "latency_ms": 50}).raise_for_status()
    try:
        out, meter = verify(sim, valid_dialogues(1, seed=3), 1.0, PER_ASPECT, "verify.judge_stop=all")
    finally:
        http.post(f"{sim.root_url}/simulator/settings", json={"profile": "openai", "latency_ms": 0}).raise_for_status()
    judge = meter.role("judge")
    assert judge.calls == 5 * 2  # per aspect: two votes in one request, the third alone
    assert judge.cached_prompt_tokens > 0.8 * judge.prompt_tokens * (judge.calls - 1) / judge.calls
