"""The model-independent semantic rules: argument grounding (``arg_value_ungrounded``,
``arg_text_ungrounded``), control tokens in answers (``answer_control_token``) and an assistant
that contradicts its calls (``assistant_contradicts_calls``), on small dialogues and on the
papers' released data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolfactory.definitions.finish import FINISH_FUNCTION
from toolfactory.formats import read
from toolfactory.formats.toolbench import read as read_toolbench
from toolfactory.models import Dialogue, Function, Message, ToolCall
from toolfactory.stages.verify.rules import RULES, check, errors
from toolfactory.stages.verify.rules.value_match import Source, string_found

VALUE, TEXT, TOKEN, CONTRADICTS = "arg_value_ungrounded", "arg_text_ungrounded", "answer_control_token", "assistant_contradicts_calls"
SEMANTIC = (VALUE, TEXT, TOKEN, CONTRADICTS)

JOURNEY = Function(name="plan_journey", description="Plan a journey between two stations.", parameters={
    "type": "object",
    "properties": {
        "from_station_id": {"type": "string", "description": "Start station id."},
        "to_station_id": {"type": "string", "description": "Destination station id."},
        "t0": {"type": "number", "description": "Initial temperature."},
        "rate": {"type": "number"},
        "steps": {"type": "integer"},
        "limit": {"type": "integer", "description": "Most results."},
        "accessible": {"type": "boolean"},
        "mode": {"type": "string", "enum": ["rail", "bus"], "default": "rail"},
        "operator": {"type": "string", "description": "Operator code, e.g. 'SNCF'."},
        "date": {"type": "string"},
        "time": {"type": "string"},
        "city": {"type": "string"},
        "query": {"type": "string"},
    },
})
CONVERT = Function(name="convert_units", description="Convert a value between unit systems.", parameters={
    "type": "object",
    "properties": {"value": {"type": "number"}, "from_unit": {"type": "string"}, "to_unit": {"type": "string"}},
})
SEARCH = Function(name="search_stations", description="Find stations by name.", parameters={
    "type": "object", "properties": {"name": {"type": "string"}},
})


def called(name: str, arguments: dict[str, Any], call_id: str = "c1") -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=json.dumps(arguments, ensure_ascii=False))


def says(text: str | None, *calls: ToolCall) -> Message:
    return Message(role="assistant", content=text, tool_calls=list(calls) or None)


def result(call_id: str, content: Any) -> Message:
    return Message(role="tool", tool_call_id=call_id, content=content if isinstance(content, str) else json.dumps(content))


def user(text: str) -> Message:
    return Message(role="user", content=text)


def dialogue(*messages: Message, tools: list[Function] | None = None, **fields: Any) -> Dialogue:
    return Dialogue(id="d", task_id="t", tools=tools or [JOURNEY, CONVERT, SEARCH], messages=list(messages), **fields)


def call_and_answer(request: str, arguments: dict[str, Any], name: str = "plan_journey", *before: Message,
                    answer: str = "Here is your journey.", **fields: Any) -> Dialogue:
    """A user request, (earlier messages), one call with `arguments`, its result and an answer."""
    return dialogue(user(request), *before, says(None, called(name, arguments, "c9")), result("c9", {"ok": True}),
                    says(answer), **fields)


def findings(d: Dialogue, code: str) -> list[str]:
    return [v.path for v in check(d) if v.code == code]


def messages_of(d: Dialogue, code: str) -> list[str]:
    return [v.message for v in check(d) if v.code == code]


# -- registration -----------------------------------------------------------------------------


def test_the_rules_are_registered_with_their_severity_and_kind() -> None:
    assert {code: (RULES[code].severity, RULES[code].kind) for code in SEMANTIC} == {
        VALUE: ("warning", "validity"), TEXT: ("warning", "validity"),
        TOKEN: ("error", "validity"), CONTRADICTS: ("error", "validity"),
    }


# -- arg_value_ungrounded -------------------------------------------------------------------


def test_values_nobody_gave_are_flagged_each_at_its_path() -> None:
    # The assistant asks for t0, the user never answers, and the calls use 84, 72 and 23.
    d = dialogue(
        user("Simulate how the tank cools down."),
        says("What initial temperature t0 should I use?"),
        user("Just run it, please."),
        says(None, called("plan_journey", {"t0": 84, "rate": 72, "steps": 23})),
        result("c1", {"ok": True}),
        says("Done."),
    )
    assert findings(d, VALUE) == [f"messages[3].tool_calls[0].arguments/{key}" for key in ("t0", "rate", "steps")]
    assert "84" in messages_of(d, VALUE)[0]


def test_an_id_other_than_the_one_the_user_gave_is_flagged() -> None:
    before = (says("What from station id should I use?"), user("The id is specific-1034."))
    assert findings(call_and_answer("I want to go to the airport.", {"from_station_id": "id-4333"}, "plan_journey", *before), VALUE) \
        == ["messages[3].tool_calls[0].arguments/from_station_id"]
    assert findings(call_and_answer("I want to go to the airport.", {"from_station_id": "specific-1034"}, "plan_journey", *before), VALUE) == []
    # Part of the given id is no more the id.
    assert findings(call_and_answer("I want to go to the airport.", {"from_station_id": "specific-103-9517"}, "plan_journey", *before), VALUE) != []


def test_a_value_an_earlier_tool_result_returned_is_grounded() -> None:
    d = dialogue(
        user("Take me from Gare de Lyon to Orly."),
        says(None, called("search_stations", {"name": "Gare de Lyon"}, "c1")),
        result("c1", {"stations": [{"id": "ST-88123", "name": "Paris Gare de Lyon"}]}),
        says(None, called("plan_journey", {"from_station_id": "ST-88123", "to_station_id": "ST-99"}, "c2")),
        result("c2", {"ok": True}),
        says("Here is your journey."),
    )
    assert findings(d, VALUE) == ["messages[3].tool_calls[0].arguments/to_station_id"]


def test_a_value_from_the_schema_or_the_system_prompt_is_grounded() -> None:
    documented = {"mode": "bus", "operator": "SNCF"}  # an enum value, a documented example
    assert findings(call_and_answer("Plan my journey.", documented), VALUE) == []
    system = Message(role="system", content="The user's home station is ST-4711.")
    d = dialogue(system, user("Plan my journey home."), says(None, called("plan_journey", {"to_station_id": "ST-4711"})),
                 result("c1", {"ok": True}), says("Done."))
    assert findings(d, VALUE) == []


def test_a_value_said_only_after_the_call_or_by_the_assistant_itself_is_flagged() -> None:
    later = dialogue(user("Plan my journey."), says(None, called("plan_journey", {"to_station_id": "ST-4711"})),
                     result("c1", {"ok": True}), says("Done."), user("I meant ST-4711, thanks."), says("You're welcome."))
    own = dialogue(user("Plan my journey."), says("I will use station ST-4711."),
                   says(None, called("plan_journey", {"to_station_id": "ST-4711"})), result("c1", {"ok": True}), says("Done."))
    assert findings(later, VALUE) == ["messages[1].tool_calls[0].arguments/to_station_id"]
    assert findings(own, VALUE) == ["messages[2].tool_calls[0].arguments/to_station_id"]


def test_an_invented_value_reused_by_a_later_call_is_reported_once() -> None:
    d = dialogue(
        user("Plan my journey."),
        says(None, called("plan_journey", {"to_station_id": "ST-4711"}, "c1")),
        result("c1", {"ok": True}),
        says(None, called("plan_journey", {"to_station_id": "ST-4711", "mode": "bus"}, "c2")),
        result("c2", {"ok": True}),
        says("Done."),
    )
    assert findings(d, VALUE) == ["messages[1].tool_calls[0].arguments/to_station_id"]


@pytest.mark.parametrize(("request_text", "arguments"), [
    ("Start at 5 degrees.", {"t0": 5.0}),
    ("Start at 5.0 degrees.", {"t0": 5}),
    ("Start at 5 degrees.", {"t0": "5"}),
    ("A budget of 1,000 euros.", {"rate": 1000}),
    ("Three steps, please.", {"steps": 3}),
    ("A rate of 20%.", {"rate": 0.2}),
    ("A rate of 3.14159.", {"rate": 3.14}),
    ("About 2 million steps.", {"steps": 2000000}),
    ("The longitude is 137.29 W.", {"rate": -137.29}),
    ("请规划未来三天的行程。", {"steps": 3}),
    ("二十一度。", {"t0": 21}),
])
def test_numbers_are_compared_as_numbers(request_text: str, arguments: dict[str, Any]) -> None:
    assert findings(call_and_answer(request_text, arguments), VALUE) == []


def test_an_integer_beyond_a_double_is_judged_without_failing() -> None:
    huge = "1" + "0" * 400
    given = dialogue(user(f"Use {huge} steps."), says(None, ToolCall(id="c1", name="plan_journey", arguments=f'{{"steps": {huge}}}')),
                     result("c1", {"ok": True}), says("Done."))
    invented = dialogue(user("Plan my journey."), says(None, ToolCall(id="c1", name="plan_journey", arguments=f'{{"steps": {huge}}}')),
                        result("c1", {"ok": True}), says("Done."))
    assert [v.code for v in check(given)] == []
    assert [v.code for v in check(invented)] == [VALUE]


def test_booleans_trivial_numbers_and_small_counts_are_never_flagged() -> None:
    assert findings(call_and_answer("Plan my journey.", {"accessible": True, "steps": 1, "t0": 0, "limit": 7}), VALUE) == []
    # A small integer for a parameter that is no count is a value someone must give; so is a large count.
    assert findings(call_and_answer("Plan my journey.", {"steps": 7, "limit": 84}), VALUE) == [
        "messages[1].tool_calls[0].arguments/steps", "messages[1].tool_calls[0].arguments/limit"]


@pytest.mark.parametrize(("request_text", "arguments"), [
    ("I live in New York.", {"city": "new york"}),
    ("I live in New-York.", {"city": "New York"}),
    ("The station is Zürich HB.", {"to_station_id": "Zurich HB"}),
    ("Stations ST-1 and ST-2.", {"to_station_id": "ST-1, ST-2"}),
    ("A concert in Chicago, please.", {"city": "Chicago, Illinois"}),
    ("我想查询北京的天气。", {"city": "北京"}),
    ("Leave on March 7th 2023.", {"date": "2023-03-07"}),
    ("Leave on the 12th of March.", {"date": "2023-03-12"}),
    ("Leave on 2023.4.15.", {"date": "2023-04-15"}),
    ("From May 15th to May 22nd, 2023.", {"date": "05/22/2023"}),
    ("Wake me on 2023-12-1 at 7:00 AM.", {"date": "2023-12-01 07:00:00"}),
    ("Set an alarm for 11PM.", {"time": "23:00"}),
])
def test_strings_are_compared_loosely(request_text: str, arguments: dict[str, Any]) -> None:
    assert findings(call_and_answer(request_text, arguments), VALUE) == []


@pytest.mark.parametrize(("request_text", "arguments"), [
    ("Leave tomorrow.", {"date": "2023-03-08"}),  # a date computed from "tomorrow": the documented limit
    ("Leave on March 7th 2023 at 9.", {"date": "2023-03-07 18:00:00"}),  # the day is given, the time is not
    ("A concert in Chicago, please.", {"city": "Boston, Illinois"}),
    ("A trip to Paris.", {"city": "Parisian"}),
    ("A trip to Paris.", {"city": "par"}),
])
def test_derived_or_partial_values_are_flagged(request_text: str, arguments: dict[str, Any]) -> None:
    assert findings(call_and_answer(request_text, arguments), VALUE) != []


def test_a_value_is_found_as_whole_words_only() -> None:
    sources = [Source("The id is specific-1034.")]
    assert string_found("specific-1034", sources) and string_found("SPECIFIC 1034", sources)
    assert not string_found("id-4333", sources) and not string_found("cific", sources)


def test_finish_and_a_recipes_built_in_action_are_not_judged() -> None:
    finish = dialogue(user("Plan my journey."), says(None, called("Finish", {"return_type": "give_answer", "final_answer": "Take the 8:15 bus."})),
                      result("c1", '{"response":"successfully giving the final answer."}'),
                      tools=[JOURNEY, FINISH_FUNCTION], recipe="toolllm")
    ask = dialogue(user("Plan my journey."), says(None, called("getDetails", {"Question": "Where do you want to go?"})),
                   result("c1", "To Orly."), says("Done."), recipe="toolalpaca")
    assert findings(finish, VALUE) + findings(finish, TEXT) == [] and findings(ask, VALUE) + findings(ask, TEXT) == []


def test_grounding_findings_are_warnings_that_do_not_reject() -> None:
    d = call_and_answer("Plan my journey.", {"to_station_id": "ST-4711"})
    verdicts = check(d)
    assert [v.code for v in verdicts] == [VALUE] and errors(verdicts) == []


# -- arg_text_ungrounded ----------------------------------------------------------------------


def test_free_text_is_grounded_by_its_words() -> None:
    assert findings(call_and_answer("Find me a cheap hotel in Paris near the Louvre.", {"query": "cheap hotels Paris Louvre"}), TEXT) == []
    # A translation keeps some words: "hashtags" is enough for a short query.
    assert findings(call_and_answer("Catchy hashtags for my project, in Spanish.", {"query": "hashtags llamativos para proyecto"}), TEXT) == []
    wrong = call_and_answer('Sync my progress of "Naruto", episode 100.', {"query": "Your Lie in April."})
    assert findings(wrong, TEXT) == ["messages[1].tool_calls[0].arguments/query"] and findings(wrong, VALUE) == []


def test_long_text_is_free_text_whatever_its_parameter_and_can_be_switched_off() -> None:
    d = call_and_answer("Plan my journey.", {"city": "somewhere green with quiet beaches and mountains"})
    assert findings(d, TEXT) == ["messages[1].tool_calls[0].arguments/city"] and findings(d, VALUE) == []
    assert TEXT not in {v.code for v in check(d, frozenset({TEXT}))}


# -- answer_control_token -------------------------------------------------------------------


def toolllm(answer: str, *after: Message) -> Dialogue:
    return dialogue(user("Convert 5 miles to km."), says("I will convert the units.", called("convert_units", {"value": 5, "from_unit": "mi", "to_unit": "km"})),
                    result("c1", {"result": 8.05}), says(answer), *after, tools=[CONVERT, FINISH_FUNCTION], recipe="toolllm")


@pytest.mark.parametrize("answer", [
    "give_answer", "`give_answer`.", "Finish", "convert_units", "return_type",
    "5 miles is 8.05 km. give_up_and_restart",
    'Done: {"return_type": "give_answer", "final_answer": "8.05 km"}',
    "5 miles is 8.05 km.<|eot_id|>",
    "<|python_tag|>convert_units(value=5)",
    'Sure: {"name": "convert_units", "arguments": {"value": 5}}',
])
def test_a_final_answer_with_control_syntax_is_rejected(answer: str) -> None:
    d = toolllm(answer)
    assert findings(d, TOKEN) == ["messages[3].content"]
    assert TOKEN in {v.code for v in errors(check(d))}


@pytest.mark.parametrize("answer", [
    "5 miles is 8.05 km. Let me know when you finish your run!",
    "The action completed: 5 miles is 8.05 km.",
    "I used convert_units: 5 miles is 8.05 km.",
    "5英里等于8.05公里。",
])
def test_words_about_actions_are_no_control_syntax(answer: str) -> None:
    assert findings(toolllm(answer), TOKEN) == []


def test_only_final_answers_are_read() -> None:
    thought = dialogue(user("Convert 5 miles."), says("give_answer", called("convert_units", {"value": 5, "from_unit": "mi", "to_unit": "km"})),
                       result("c1", {"result": 8.05}), says("8.05 km."))
    before_user = toolllm("give_answer", user("Thanks! And 10 miles?"), says("That is 16.09 km."))
    assert findings(thought, TOKEN) == [] and findings(before_user, TOKEN) == ["messages[3].content"]


def test_a_call_written_as_text_is_reported_once() -> None:
    react = "Action: convert_units\nAction Input: {\"value\": 5}"
    native = toolllm(react)
    assert findings(native, TOKEN) == [] and "sample_call_format_mismatch" in {v.code for v in check(native)}
    declared = Message(role="system", content="Function call format: react")
    text_format = dialogue(declared, user("Convert 5 miles."), says(react))
    assert findings(text_format, TOKEN) == ["messages[2].content"]


# -- assistant_contradicts_calls ------------------------------------------------------------


def test_a_refusal_with_a_call_and_a_conversion_to_itself_are_rejected() -> None:
    # "I don't have a function..." and then convert_units from imperial to imperial.
    d = dialogue(
        user("integer minimum maximum"),
        says('I don\'t have a function for "integer minimum maximum". I can convert units and more, if that helps.',
             called("convert_units", {"value": 456.92, "from_unit": "imperial", "to_unit": "imperial"})),
        result("c1", {"result": 456.92}),
        says("Done."),
    )
    assert findings(d, CONTRADICTS) == ["messages[1].content", "messages[1].tool_calls[0].arguments"]
    assert CONTRADICTS in {v.code for v in errors(check(d))}


def test_a_refusal_right_before_a_calling_turn_is_flagged() -> None:
    d = dialogue(user("Book me a flight."), says("Sorry, there is no tool available for booking flights."),
                 says(None, called("convert_units", {"value": 1, "from_unit": "mi", "to_unit": "km"})),
                 result("c1", {"result": 1.6}), says("Done."))
    assert findings(d, CONTRADICTS) == ["messages[1].content"]


@pytest.mark.parametrize("text", [
    "I don't have a function to book flights directly, but I can convert the distance.",
    "None of the available functions books flights. I'll convert the distance instead.",
    'There is no function named "authenticate". I will try another approach.',
    "我没有可以预订航班的函数，但是可以换算距离。",
    "我没有可以完成这个请求的函数。",
    "Let me convert the distance for you.",
])
def test_no_refusal_or_a_workaround_is_no_contradiction(text: str) -> None:
    d = dialogue(user("Book me a flight."), says(text, called("convert_units", {"value": 1, "from_unit": "mi", "to_unit": "km"})),
                 result("c1", {"result": 1.6}), says("Done."))
    assert findings(d, CONTRADICTS) == []


def test_giving_up_or_asking_the_user_after_a_refusal_is_no_contradiction() -> None:
    give_up = dialogue(user("Log me in."), says("There is no function available for user authentication, so I will give up.",
                                                called("Finish", {"return_type": "give_up_and_restart"})),
                       result("c1", '{"response":"chose to give up and restart"}'), tools=[JOURNEY, FINISH_FUNCTION])
    user_between = dialogue(user("Book me a flight."), says("I don't have a tool for booking flights."), user("Then convert 1 mile."),
                            says(None, called("convert_units", {"value": 1, "from_unit": "mi", "to_unit": "km"})),
                            result("c1", {"result": 1.6}), says("1.61 km."))
    assert findings(give_up, CONTRADICTS) == [] and findings(user_between, CONTRADICTS) == []


@pytest.mark.parametrize(("arguments", "flagged"), [
    ({"value": 5, "from_unit": "km", "to_unit": "KM "}, True),
    ({"value": 5, "from_unit": "km", "to_unit": "mi"}, False),
    ({"amount": 5, "sourceCurrency": "USD", "targetCurrency": "USD"}, True),
    ({"text": "hi", "source_language": "en", "target_language": "en"}, True),
    ({"amount": 5, "currency_from": "EUR", "currency_to": "EUR"}, True),
    ({"amount": 5, "from": "EUR", "to": "EUR"}, True),  # bare from/to on a function that converts
    ({"date_from": "2024-05-01", "date_to": "2024-05-01"}, False),  # a one-day range
    ({"from_station_id": "ST-1", "to_station_id": "ST-1"}, False),
])
def test_a_conversion_call_to_the_same_unit_is_flagged(arguments: dict[str, Any], flagged: bool) -> None:
    d = call_and_answer("Convert 5 km to miles, 5 USD, 5 EUR, and translate hi.", arguments, "convert_units")
    assert bool(findings(d, CONTRADICTS)) == flagged


def test_bare_from_and_to_of_a_function_that_converts_nothing_are_not_judged() -> None:
    send = Function(name="send_message", description="Send a message.", parameters={"type": "object", "properties": {}})
    d = call_and_answer("Send a note to myself, ana@example.com.", {"from": "ana@example.com", "to": "ana@example.com"},
                        "send_message", tools=[send])
    assert findings(d, CONTRADICTS) == []


# -- the released data ----------------------------------------------------------------------


def semantic_codes(d: Dialogue) -> set[str]:
    return {v.code for v in check(d)} & set(SEMANTIC)


@pytest.fixture(scope="module")
def toolalpaca(shared_data: Path) -> dict[str, Dialogue]:
    return {d.id: d for d in read(shared_data / "toolalpaca/eval_simulated.json", "toolalpaca") if isinstance(d, Dialogue)}


def test_no_path_of_toolbench_is_flagged(shared_data: Path) -> None:
    answers = shared_data / "toolbench/answer/G1_answer"
    paths = [d for d in read_toolbench(answers, paths="all") if isinstance(d, Dialogue)]
    assert len(paths) == 16 and [d.id for d in paths if semantic_codes(d)] == []
    # Two paths whose thoughts say "there is no function …": after a hallucinated name (then
    # another approach), and before giving up with Finish.
    thoughts = {d.id: " ".join(m.content or "" for m in d.messages if m.role == "assistant") for d in paths}
    assert "no function named" in thoughts["69_ChatGPT_DFS_woFilter_w2/tree6"]
    assert "no function available" in thoughts["69_ChatGPT_DFS_woFilter_w2/tree5"]


def test_toolalpaca_s_golden_answers_flagged_are_the_ones_read_by_hand(toolalpaca: dict[str, Dialogue]) -> None:
    assert len(toolalpaca) == 100
    flagged = {code: sorted(i for i, d in toolalpaca.items() if code in semantic_codes(d)) for code in SEMANTIC}
    assert flagged == {
        # invented ids, a type nobody gave, a template placeholder; the language the user writes in
        VALUE: ["A Bíblia Digital/0", "A Bíblia Digital/3", "A Bíblia Digital/4", "A Bíblia Digital/5",
                "Apache Superset/7", "Apache Superset/8", "Auth0/5"],
        # a title searched for other anime; a comment the model composed
        TEXT: ["AbuseIPDB/10", "AniAPI/3", "AniAPI/4", "AniAPI/5"],
        TOKEN: [], CONTRADICTS: [],
    }


def test_a_small_count_the_user_left_open_is_not_flagged(toolalpaca: dict[str, Dialogue]) -> None:
    # "Can you provide some facts?" -> getAxolotlFacts(category=..., limit=3)
    facts = toolalpaca["Axolotl/3"]
    assert json.loads((facts.messages[1].tool_calls or [])[0].arguments)["limit"] == 3
    assert semantic_codes(facts) == set()


# -- verify.rejecting_warnings ---------------------------------------------------------------


def test_a_run_can_make_a_warning_rule_reject() -> None:
    """`verify.rejecting_warnings` turns a warning rule's findings into rejections in the verify
    stage (and the early check, which reads the same policy); an unknown or error rule is refused
    when the run is planned."""
    import asyncio

    from toolfactory.config import Config
    from toolfactory.errors import ConfigError
    from toolfactory.stages import ShardContext, ShardSpec
    from toolfactory.stages.verify.stage import VerifyStage

    invented = call_and_answer("I want to go to the airport.", {"from_station_id": "id-4333"}, recipe="toolace")

    def verify(**settings: Any) -> Any:
        config = Config.model_validate({"verify": {"judges": [], **settings}})
        ctx = ShardContext(config=config, run_id="r", gateway=None)  # type: ignore[arg-type]
        return asyncio.run(VerifyStage().run(ShardSpec("verify", 0, ("in",)), [invented.model_dump()], ctx))

    assert [d.id for d in verify().records] == ["d"]  # a warning by default: kept, with its verdict
    rejected = verify(rejecting_warnings=[VALUE]).rejected
    assert [r.reasons for r in rejected] == [[VALUE]]

    class Planning:
        def __init__(self, codes: list[str]) -> None:
            self.config = Config.model_validate({"verify": {"rejecting_warnings": codes}})

    for wrong in (["no_such_rule"], [TOKEN]):
        with pytest.raises(ConfigError, match="verify.rejecting_warnings: .* are not warning rules"):
            VerifyStage().plan(Planning(wrong))  # type: ignore[arg-type]
