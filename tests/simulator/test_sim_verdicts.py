"""A judge's verdict in the simulator follows the material and the question, not the wording."""

from __future__ import annotations

from toolfactory.simulator import SimulatorSettings
from toolfactory.simulator.verdicts import settle

ANSWER = {"type": "object", "properties": {"passes": {"type": "boolean"}, "reason": {"type": "string"}}}
QUESTIONS = {f"q{i}": f"Is point {i} of the dialogue right?" for i in range(40)}


def alone(material: str, question: str, seed: int = 0, settings: SimulatorSettings = SimulatorSettings()) -> bool:
    messages = [{"role": "user", "content": f"{material}\n\nQuestion: {question}"}]
    return bool(settle({"passes": True, "reason": "r"}, ANSWER, messages, settings, seed)["passes"])


def together(material: str, seed: int = 0, settings: SimulatorSettings = SimulatorSettings()) -> dict[str, bool]:
    schema = {"type": "object", "properties": {k: {**ANSWER, "description": q} for k, q in QUESTIONS.items()}}
    listed = "\n".join(f"- {k}: {q}" for k, q in QUESTIONS.items())
    messages = [{"role": "user", "content": f"{material}\n\nQuestions:\n{listed}"}]
    value = {k: {"passes": True, "reason": "r"} for k in QUESTIONS}
    return {k: v["passes"] for k, v in settle(value, schema, messages, settings, seed).items()}


def test_a_question_asked_alone_or_with_others_gets_the_same_verdict() -> None:
    for material in ("dialogue one", "dialogue two"):
        assert together(material) == {k: alone(material, q) for k, q in QUESTIONS.items()}
    verdicts = list(together("dialogue one").values())
    assert True in verdicts and False in verdicts  # drawn, not constant (boolean_true_rate 0.5)
    assert together("dialogue one") != together("dialogue two")  # and they follow the material


def test_a_re_ask_answers_the_question_asked_before() -> None:
    question = QUESTIONS["q3"]
    first = [{"role": "user", "content": f"dialogue one\n\nQuestion: {question}"}]
    reask = [*first, {"role": "assistant", "content": "{"}, {"role": "user", "content": "That was not valid JSON."}]
    for seed in range(6):
        assert settle({"passes": True}, ANSWER, reask, SimulatorSettings(), seed) == {"passes": alone("dialogue one", question, seed)}


def test_resamples_repeat_the_first_verdict_unless_they_vary() -> None:
    steady = SimulatorSettings(sample_variation=0.0)
    assert {alone("dialogue one", q, seed, steady) == alone("dialogue one", q, 0, steady) for q in QUESTIONS.values() for seed in (1, 2)} == {True}
    varied = SimulatorSettings(sample_variation=1.0)
    assert any(alone("dialogue one", q, 1, varied) != alone("dialogue one", q, 0, varied) for q in QUESTIONS.values())


def test_an_answer_without_a_question_is_left_as_drawn() -> None:
    messages = [{"role": "user", "content": "Write a tool description."}]
    assert settle({"passes": True}, ANSWER, messages, SimulatorSettings(), 0) == {"passes": True}
