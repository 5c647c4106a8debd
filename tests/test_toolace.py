"""The toolace recipe's ToolACE behaviours on the simulator: self-consistency with independent
samples, values compared as a user would and early stopping; the question that ends a dialogue
(insufficient information); self-guided complexity; API clusters of the whole pool."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

from toolfactory.config import ComplexityGuideConfig, load_config
from toolfactory.curation.pool_clusters import assign_clusters, centroids_path, pool_centroids
from toolfactory.llm import Endpoint, LLMGateway
from toolfactory.models import Dialogue, Function, Message, Task, Tool, ToolCall
from toolfactory.stages import ShardSpec, StageOutput
from toolfactory.stages.dialogues.decisions import Tally, decision_key, normalised
from toolfactory.stages.dialogues.modes import shown_mode
from toolfactory.stages.dialogues.stage import DialoguesStage
from toolfactory.stages.tasks.complexity_guide import Complexity, guided, passed, task_complexity
from toolfactory.stages.tasks.stage import TasksStage
from toolfactory.stages.verify.rules import check, errors
from toolfactory.storage import ObjectStore

# The simulator, the seed pool and one stage run against it, as the recipe tests use them.
from test_recipes import NO_FAULTS, pool, run_stage, sim  # noqa: E402,F401 - fixtures are found by name


def dialogues_of(sim: Any, tasks: list[Task], root: Path, knobs: dict[str, float] | None = None, *overrides: str) -> StageOutput:
    return run_stage(sim, DialoguesStage(), ShardSpec("dialogues", 0, ()), [t.model_dump() for t in tasks], root, knobs, *overrides)


def weather_task(pool: list[Tool], mode: str, k: int = 0) -> Task:
    weather = [t for t in pool if t.category == "Weather"][:1]
    return Task(id=f"t-{mode}-{k}", tools=weather, instruction=f"What is the weather in city number {k} this weekend?",
                relevant_functions=[weather[0].functions[0].name], mode=mode, recipe="toolace", scenario="same_domain")


def call(name: str, arguments: str, cid: str = "c") -> ToolCall:
    return ToolCall(id=cid, name=name, arguments=arguments)


# --- self-consistency ------------------------------------------------------------------------


def test_call_values_are_compared_as_a_user_would() -> None:
    same = [
        ('{"city": "Lyon", "days": 3}', '{"days": 3.0, "city": "  lyon "}'),
        ('{"days": "3"}', '{"days": 3}'),
        ('{"city": "New  York"}', '{"city": "new york"}'),
        ('{"city": "Lyon", "units": null}', '{"city": "Lyon"}'),
    ]
    for a, b in same:
        assert decision_key([call("f", a)]) == decision_key([call("f", b, "other-id")]), (a, b)
    different = [('{"days": 3}', '{"days": 3.5}'), ('{"city": "Lyon"}', '{"city": "Lyons"}'),
                 ('{"stops": ["a", "b"]}', '{"stops": ["b", "a"]}'), ('{"flag": true}', '{"flag": 1}')]
    for a, b in different:
        assert decision_key([call("f", a)]) != decision_key([call("f", b)]), (a, b)
    parallel = [call("f", '{"city": "Lyon"}', "1"), call("g", '{"city": "Oslo"}', "2")]
    assert decision_key(parallel) == decision_key(list(reversed(parallel)))
    assert decision_key([]) != decision_key(parallel)
    assert normalised("NaN") == "nan" and normalised("4.50") == 4.5


def test_stopping_early_decides_as_the_full_vote_would() -> None:
    # Every sequence of votes over three decisions, for 2 to 5 samples: the vote decided from
    # the first samples is the vote over all of them, and the same sample is kept.
    for planned in range(2, 6):
        for votes in itertools.product("abc", repeat=planned):
            full = Tally(planned)
            for v in votes:
                full.add(v)
            early = Tally(planned)
            for v in votes:
                early.add(v)
                if early.decided:
                    break
            assert early.winner() == full.winner(), votes
    three = Tally(3)
    three.add("a"), three.add("a")
    assert three.decided and len(three.keys) == 2  # two of three agree: the third cannot change it


def test_each_sample_thinks_on_its_own_and_early_stopping_saves_calls(sim: Any, pool: list[Tool], tmp_path: Path) -> None:
    tasks = [weather_task(pool, "single", k) for k in range(8)]
    knobs = {"sample_variation": 0.3}
    early = dialogues_of(sim, tasks, tmp_path / "early", knobs)
    full = dialogues_of(sim, tasks, tmp_path / "full", knobs, "dialogues.self_consistency_early_stop=false")
    # The same decisions: the same dialogues kept, message for message, and the same drops.
    assert early.rejections() == full.rejections()
    by_id = {d.id: d for d in full.records if isinstance(d, Dialogue)}
    kept = [d for d in early.records if isinstance(d, Dialogue)]
    assert kept and all(d.messages == by_id[d.id].messages for d in kept)
    # Fewer samples and calls for it.
    drawn = sum(d.generation["decision_samples"] for d in kept)
    assert drawn < sum(d.generation["decision_samples_planned"] for d in kept)
    assert drawn < sum(by_id[d.id].generation["decision_samples"] for d in kept)
    assert sum(d.llm_calls for d in kept) < sum(by_id[d.id].llm_calls for d in kept)
    assert early.profile["decision_samples"]["drawn"] < early.profile["decision_samples"]["planned"]
    # Every sample has its own formal thinking: two calls per sample, besides the executor's.
    for d in kept:
        executed = sum(m.role == "tool" for m in d.messages)
        read = 0 if d.messages[2].tool_calls else 1
        assert d.llm_calls == 2 * d.generation["decision_samples"] + executed + read


def test_a_dialogue_dropped_for_disagreeing_samples_records_what_it_spent(sim: Any, pool: list[Tool], tmp_path: Path) -> None:
    tasks = [weather_task(pool, "single", k) for k in range(12)]
    # Every resample answered anew: some turns' three samples disagree, and their dialogues are dropped.
    out = dialogues_of(sim, tasks, tmp_path, {"sample_variation": 1.0, "rate_hallucinated_function": 0.5})
    dropped = [r for r in out.rejected if r.reasons == ["dialogue_inconsistent_decision"]]
    assert dropped
    for rejected in dropped:
        # At least the three samples of the failed turn, each with its own formal thinking.
        assert rejected.record["llm_calls"] >= 3 * 2
        assert [m["role"] for m in rejected.record["messages"]][:2] == ["system", "user"]
    kept = sum(d.llm_calls for d in out.records if isinstance(d, Dialogue))
    assert out.profile["llm_calls"]["toolace"] == kept + sum(r.record.get("llm_calls", 0) for r in out.rejected)


def test_a_sample_the_majority_overruled_is_kept_as_an_alternative_at_its_turn(sim: Any, pool: list[Tool], tmp_path: Path) -> None:
    tasks = [weather_task(pool, "single", k) for k in range(12)]
    out = dialogues_of(sim, tasks, tmp_path, {"sample_variation": 0.5}, "dialogues.self_consistency_early_stop=false")
    kept = [d for d in out.records if isinstance(d, Dialogue)]
    outvoted = [(d, a) for d in kept for a in d.generation.get("alternatives", [])]
    assert outvoted
    for dialogue, alternative in outvoted:
        assert alternative["kind"] == "outvoted"
        chosen, other = dialogue.messages[alternative["at"]], Message.model_validate(alternative["message"])
        assert chosen.role == other.role == "assistant" and dialogue.messages[alternative["at"] - 1].role in ("user", "tool")
        assert decision_key(chosen.tool_calls or []) != decision_key(other.tool_calls or [])
    # A vote with no majority keeps no alternative: the turn is masked (or the dialogue dropped).
    masked = dialogues_of(sim, tasks, tmp_path / "masked", {"sample_variation": 1.0}, "dialogues.on_disagreement=mask")
    for dialogue in (d for d in masked.records if isinstance(d, Dialogue)):
        at = {a["at"] for a in dialogue.generation.get("alternatives", [])}
        assert not any(dialogue.messages[i].masked for i in at)


# --- asking for a missing value --------------------------------------------------------------


def test_an_insufficient_information_dialogue_ends_at_the_assistant_s_question(sim: Any, pool: list[Tool], tmp_path: Path) -> None:
    out = dialogues_of(sim, [weather_task(pool, "insufficient_info")], tmp_path, {"rate_clarify": 1.0},
                       "dialogues.self_consistency=1")
    d = out.records[0]
    assert isinstance(d, Dialogue), out.rejections()
    assert [m.role for m in d.messages] == ["system", "user", "assistant"]
    assert d.messages[-1].content and not d.messages[-1].tool_calls
    assert d.generation["clarification_turns"] == [2]
    assert d.mode == d.target_mode == "insufficient_info" and errors(check(d)) == []


def test_what_the_user_agent_read_tells_a_question_from_a_decline() -> None:
    tools = [Function(name="get_weather", description="Weather of a city.",
                      parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})]
    messages = [Message(role="system", content="s"), Message(role="user", content="The weather, please."),
                Message(role="assistant", content="Which city do you mean.")]
    asked = Dialogue(id="a", task_id="t", tools=tools, messages=messages, generation={"clarification_turns": [2]})
    declined = Dialogue(id="b", task_id="t", tools=tools, messages=messages, generation={"clarification_turns": []})
    assert shown_mode(asked) == "insufficient_info" and shown_mode(declined) == "non_tool"


# --- self-guided complexity ------------------------------------------------------------------


def test_the_guided_complexity_is_one_step_beyond_what_the_target_passes() -> None:
    settings = ComplexityGuideConfig(target_model="m", pass_threshold=0.5)
    results = [(Complexity(3, 1, 1), True), (Complexity(3, 1, 1), True), (Complexity(5, 2, 1), False),
               (Complexity(5, 2, 2), False), (Complexity(4, 1, 2), True), (Complexity(2, 0, 1), True)]
    assert guided(results, settings) == Complexity(apis=5, calls=2, turns=3)
    # Nothing passed: the easiest level seen, not beyond it.
    assert guided([(Complexity(4, 2, 1), False)], settings) == Complexity(4, 2, 1)
    assert guided([(Complexity(12, 4, 3), True)], settings) == Complexity(12, 4, 3)  # bounded


def test_a_first_turn_passes_when_it_does_what_the_task_needs(pool: list[Tool]) -> None:
    task = weather_task(pool, "single")
    fn = task.tools[0].functions[0]
    required = fn.parameters.get("required", [])
    good = json.dumps({name: "Lyon" for name in required})
    assert passed(task, [call(fn.name, good)]) and not passed(task, []) and not passed(task, [call("nope", "{}")])
    assert passed(weather_task(pool, "insufficient_info"), []) and not passed(weather_task(pool, "non_tool"), [call(fn.name, good)])
    assert task_complexity(task) == Complexity(len(task.tools[0].functions), 1, 1)


def guided_tasks(sim: Any, pool: list[Tool], root: Path, knobs: dict[str, float], *overrides: str) -> StageOutput:
    return run_stage(sim, TasksStage(), ShardSpec("tasks", 0, (), {"part": 0, "parts": 1}), [t.model_dump() for t in pool],
                     root, knobs, "tasks.recipes={toolace: 1}", "tasks.instructions_per_tool=1", "tasks.multi_turn=0.5",
                     "tasks.complexity.target_model=sim-target", "tasks.complexity.probe_tools=8", *overrides)


def test_tasks_after_the_probe_are_made_just_beyond_the_target_s_ability(sim: Any, pool: list[Tool], tmp_path: Path) -> None:
    tools = [t for t in pool if t.category in ("Weather", "Finance", "Travel")]
    # A weak target: every call it makes names a function that does not exist (the simulator's
    # hallucination fault hits only the target here: the tasks stage's other calls are JSON).
    weak = guided_tasks(sim, tools, tmp_path / "weak", {"rate_hallucinated_function": 1.0}, "tasks.modes={single: 1, parallel: 1}")
    probe = weak.profile["complexity_probe"]
    assert probe["tasks"] == 8 and probe.get("passed", 0) == 0
    before = {k: v for k, v in weak.profile["complexity_before"].items()}
    easiest = {dim: min(int(k.split("=")[1]) for k in before if k.startswith(dim + "=")) for dim in ("apis", "calls", "turns")}
    assert set(weak.profile["complexity_guided"]) == {f"{d}={v}" for d, v in easiest.items()}  # nothing passed: the easiest level seen
    after = [t for t in weak.records if isinstance(t, Task)][8:]
    assert after and all(task_complexity(t).turns == easiest["turns"] and t.mode == "single" for t in after)
    assert all(task_complexity(t).apis <= easiest["apis"] for t in after)
    assert {k for k in weak.profile["complexity_after"] if not k.startswith("apis=")} == {
        f"calls={easiest['calls']}", f"turns={easiest['turns']}"}
    assert {k for k in before if k.startswith("turns=")} != {f"turns={easiest['turns']}"}  # the probe had more
    # A target that declines what no offered function serves passes every non-tool probe: the
    # tasks after are one step beyond the largest tool sets and most turns it was shown.
    strong = guided_tasks(sim, tools, tmp_path / "strong", {"obedience": 1.0}, "tasks.modes={non_tool: 1}")
    assert strong.profile["complexity_probe"]["passed"] == 8
    shown = {k for k in strong.profile["complexity_before"] if k.startswith("apis=")}
    assert f"apis={max(int(k.split('=')[1]) for k in shown) + 1}" in strong.profile["complexity_guided"]
    assert "turns=3" in strong.profile["complexity_guided"]
    # Without a target model nothing is probed.
    plain = run_stage(sim, TasksStage(), ShardSpec("tasks", 0, (), {"part": 0, "parts": 1}), [t.model_dump() for t in tools[:4]],
                      tmp_path, {}, "tasks.recipes={toolace: 1}")
    assert "complexity_probe" not in plain.profile


# --- diversity over the whole pool -----------------------------------------------------------


def test_clusters_are_fitted_on_the_pool_once_and_mean_the_same_on_later_nights(sim: Any, pool: list[Tool], tmp_path: Path) -> None:
    config = load_config(None, [f"storage.root={tmp_path}"], environ={})
    functions = [fn for tool in pool for fn in tool.functions]
    first, second = functions[::2], functions[1::2]

    async def go() -> tuple[dict[str, int], dict[str, int], dict[str, int], int]:
        store = ObjectStore.open(config.storage)
        async with LLMGateway(Endpoint(sim.base_url, "sk-test"), config.llm) as gateway:
            model = config.llm.embedding_model
            night1 = await pool_centroids(store, functions, gateway, model=model, k=6, seed=0, run_id="night-1")
            assert night1 is not None
            # Night 2 sees a pool that grew (here: its own half only), yet keeps night 1's centroids.
            night2 = await pool_centroids(store, second, gateway, model=model, k=6, seed=0, run_id="night-2")
            assert night2 is not None and night2.run_id == "night-1" and night2.fitted_on == night1.fitted_on
            whole = await assign_clusters(functions, night1, gateway)
            return (await assign_clusters(first, night2, gateway), await assign_clusters(second, night2, gateway), whole,
                    night2.k)

    a, b, whole, k = asyncio.run(go())
    assert ObjectStore.open(config.storage).exists(centroids_path(config.llm.embedding_model, 6)) and k == 6
    # A function's cluster does not depend on which night's APIs it was clustered with.
    assert {**a, **b} == whole and len(set(whole.values())) > 1


# --- dependent requests over functions that chain ----------------------------------------------


def test_a_dependent_request_is_asked_for_only_over_functions_one_of_which_feeds_another(sim: Any, pool: list[Tool], tmp_path: Path) -> None:
    tools = [t for t in pool if t.name in ("SevereWeatherAlerts", "MathSolver")]
    out = run_stage(sim, TasksStage(), ShardSpec("tasks", 0, (), {"part": 0, "parts": 1}), [t.model_dump() for t in tools],
                    tmp_path, {"obedience": 1.0}, "tasks.recipes={toolace: 1}", "tasks.modes={dependent: 1}")
    tasks = [t for t in out.records if isinstance(t, Task)]
    by_anchor = {name: [t for t in tasks if t.tools[0].name == name] for name in ("SevereWeatherAlerts", "MathSolver")}
    assert by_anchor["SevereWeatherAlerts"] and by_anchor["MathSolver"]
    # The alerts API chains (list, then one alert): its requests are dependent, written on the
    # link the prompt names (the simulator, like a model, builds on it: the id is left out).
    assert all(t.mode == "dependent" for t in by_anchor["SevereWeatherAlerts"])
    assert all(t.relevant_functions == ["list_active_alerts", "get_alert"] and "alert id" not in t.instruction
               for t in by_anchor["SevereWeatherAlerts"])
    # No function of the solver feeds another: asked for several calls, not for dependent ones.
    assert all(t.mode == "parallel" for t in by_anchor["MathSolver"])
