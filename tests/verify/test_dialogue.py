"""Dialogue correctness rules (dialogue_*)."""

from __future__ import annotations

import pytest

from toolfactory.models import Message, ToolCall
from toolfactory.stages.verify.rules import RULES, check
from toolfactory.stages.verify.rules.dialogue import MAX_ANSWER_CHARS, script_units, truncation

from .helpers import ANSWER, WEATHER, chat, codes, dialogue


def test_no_function_call_is_rejected_for_tool_modes_only() -> None:
    plain = [("user", "hi"), ("assistant", "Hello! How can I help?")]
    assert codes(chat(*plain)) == {"dialogue_no_function_call"}
    assert codes(chat(*plain, mode="non_tool")) == set()


@pytest.mark.parametrize(
    "broken",
    [
        dialogue(answer=None),  # ends with the tool response
        dialogue(answer="  "),
        dialogue(answer=""),
        chat(("user", "Weather?"), Message(role="assistant", tool_calls=[ToolCall(id="c", name="get_forecast", arguments='{"city": "Oslo"}')])),
    ],
)
def test_no_final_answer(broken) -> None:  # type: ignore[no-untyped-def]
    assert "dialogue_no_final_answer" in codes(broken)
    assert "dialogue_missing_field" not in codes(broken)  # an empty closing answer is one fault, one code


def test_a_final_answer_passes() -> None:
    assert check(dialogue()) == []


@pytest.mark.parametrize(
    ("broken", "path"),
    [
        (dialogue(tools=[]), "tools"),
        (chat(("system", "Be brief."), ("assistant", "Hello! How can I help you today?"), mode="non_tool"), "messages"),
        (dialogue(user=""), "messages[1]"),
        (dialogue(response=""), "messages[3]"),
        (chat(("system", " "), ("user", "Hi."), ("assistant", "Hello."), mode="non_tool"), "messages[0]"),
        (chat(("user", "Hi."), ("assistant", None), ("assistant", "Hello."), mode="non_tool"), "messages[1]"),
    ],
)
def test_missing_field(broken, path: str) -> None:  # type: ignore[no-untyped-def]
    verdicts = [v for v in check(broken) if v.code == "dialogue_missing_field"]
    assert [v.path for v in verdicts] == [path]
    assert codes(broken) == {"dialogue_missing_field"}  # e.g. no user turn is not also a role-order fault


def test_empty_response_body_is_content() -> None:
    # A tool answering "{}" has content; only blank text is missing.
    assert codes(dialogue(response={})) == set()


def test_answer_too_long_bound_is_inclusive() -> None:
    sentence = "The forecast stays sunny and warm. "
    at_bound = (sentence * (MAX_ANSWER_CHARS // len(sentence) + 1))[: MAX_ANSWER_CHARS - 1].rstrip() + "."
    at_bound = at_bound.ljust(MAX_ANSWER_CHARS - 1, " ")[: MAX_ANSWER_CHARS - 1] + "."
    assert len(at_bound) == MAX_ANSWER_CHARS
    assert codes(dialogue(answer=at_bound)) == set()
    verdicts = check(dialogue(answer=at_bound + " Bye."))
    assert [(v.code, v.path) for v in verdicts] == [("dialogue_answer_too_long", "messages[4].content")]


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b", "\x7f", "\x85", "\ufffd", "\ud83d", "\udc00"])
def test_invalid_characters_are_found_where_they_are(char: str) -> None:
    assert [(v.code, v.path) for v in check(dialogue(answer=f"Sunny{char} and warm."))] == [("dialogue_invalid_characters", "messages[4].content")]
    assert [v.path for v in check(dialogue(user=f"Weather{char} in Lyon for 3 days?"))] == ["messages[1].content"]
    d = dialogue()
    d.messages[2].reasoning = f"I need{char} the forecast."
    assert [v.path for v in check(d)] == ["messages[2].reasoning"]


def test_invalid_characters_in_raw_argument_text() -> None:
    assert [(v.code, v.path) for v in check(dialogue(arguments='{"city": "Lyon\ufffd"}'))] == [("dialogue_invalid_characters", "messages[2].tool_calls[0].arguments")]


@pytest.mark.parametrize("text", ["Line one.\nLine two.", "Col\tumn.", "Windows\r\nline.", "Café crème ☀️ 🌧.", "東京は晴れです。"])
def test_ordinary_text_has_no_invalid_characters(text: str) -> None:
    assert "dialogue_invalid_characters" not in codes(dialogue(answer=text))


# -- mixed language ----------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("user", "answer"),
    [
        ("Weather in Lyon for 3 days?", ANSWER),
        ("Weather in Lyon for 3 days?", "The hotel 北京饭店 is close to the station, and it has good reviews from guests."),
        ("Weather in Zürich?", "In Zürich it will be 21 °C, with a light breeze from the lake."),
        ("里昂未来三天的天气怎么样？", "里昂未来三天都是晴天，最高气温大约21度。"),
        ("帮我查一下iPhone 14的价格。", "iPhone 14 Pro Max 的价格是999美元，您可以在 https://www.apple.com/shop/buy-iphone 购买。"),
        ("東京の天気を教えてください。", "東京は明日晴れで、最高気温は25度です。"),
        ("Какая погода в Москве?", "В Москве завтра солнечно, около 21 градуса."),
        ("Translate 'good morning' into Chinese.", "早上好 means good morning in Chinese, and you can use it until about noon."),
        ("Hi", "好的! Here is the forecast for Lyon."),  # one unit only: below the minimum
    ],
)
def test_consistent_or_lightly_mixed_answers_pass(user: str, answer: str) -> None:
    assert "dialogue_mixed_language" not in codes(dialogue(user=user, answer=answer))


@pytest.mark.parametrize(
    ("user", "answer"),
    [
        ("Weather in Lyon for 3 days?", "It will be sunny in Lyon. 根据查询结果，未来三天都是晴天，最高气温大约二十一度。"),
        ("里昂未来三天的天气怎么样？", "The forecast for Lyon shows sunny skies and highs around 21 degrees for three days."),
        ("里昂未来三天的天气怎么样？", "里昂未来三天都是晴天。The temperature will reach about 21 degrees, and the wind stays light."),
        ("Какая погода в Москве?", "В Москве завтра will be sunny with a light breeze, около 21 градуса."),
    ],
)
def test_mixed_or_switched_scripts_are_a_warning(user: str, answer: str) -> None:
    verdicts = [v for v in check(dialogue(user=user, answer=answer)) if v.code == "dialogue_mixed_language"]
    assert [(v.severity, v.path) for v in verdicts] == [("warning", "messages[4].content")]
    assert RULES["dialogue_mixed_language"].severity == "warning"


def test_a_user_who_mixes_scripts_is_not_judged() -> None:
    user = "帮我 check the weather 在里昂 please for three days"
    assert "dialogue_mixed_language" not in codes(dialogue(user=user, answer="里昂未来三天都是晴天。The wind stays light."))


def test_script_units_count_words_and_cjk_characters() -> None:
    assert script_units("hello big world") == {"latin": 3}
    assert script_units("see 北京 and https://x.org/abc get_forecast `code`") == {"latin": 2, "cjk": 1}
    assert script_units("Hello iPhone GPS Lyon Москва go") == {"latin": 1}  # names, brands and acronyms are left out
    assert script_units("北京饭店，上海。") == {"cjk": 3}  # a run of n Han characters is ceil(n/2) words
    assert script_units("नमस्ते दुनिया") == {"devanagari": 2}  # combining marks do not split words


# -- truncation --------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "text",
    [
        ANSWER,
        "Is there anything else?",
        "Done!",
        "The options are (a) sunny and (b) cloudy.",
        "Highs of 21",
        "Enjoy the sun ☀️",
        "Here is the list:\n- Lyon\n- Paris\n- Option C",
        "He said \"see you\"",
        "Prices start at $14.99 (tax included)",
        "Waiting....",
        "最高气温大约21度。",
        "1) Lyon 2) Paris",
    ],
)
def test_complete_answers_pass(text: str) -> None:
    assert truncation(text) is None
    assert "dialogue_incomplete_answer" not in codes(dialogue(answer=text))


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("It will be sunny in Lyon,", "dangling ','"),
        ("It will be sunny in Lyon and", "dangling word 'and'"),
        ("The forecast for the", "dangling word 'the'"),
        ("Here are the results:", "dangling ':'"),
        ("It will be sunny in Lyon for the next...", "ellipsis"),
        ("It will be sunny in Lyon for the next…", "ellipsis"),
        ("You can book it [here](https://example.com/hotel?id=12", "unclosed '('"),
        ("The title is \"Sunny days in Lyon", "unclosed double quote"),
        ("Run this:\n```\nls -l\n```\nthen this:\n```\nrm -r build", "unclosed code fence"),
        ("里昂未来三天都是晴天，", "dangling '，'"),
    ],
)
def test_truncated_answers_fail(text: str, why: str) -> None:
    assert why in (truncation(text) or "")
    user = "里昂（Lyon）未来三天的天气怎么样？" if "里昂" in text else "Weather in Lyon for 3 days?"
    assert [(v.code, v.path) for v in check(dialogue(answer=text, user=user))] == [("dialogue_incomplete_answer", "messages[4].content")]


def test_only_the_final_answer_is_judged_for_truncation() -> None:
    d = dialogue()
    d.messages[2].content = "Let me check the forecast, and"
    assert codes(d) == set()


def test_an_intermediate_assistant_text_counts_for_length_and_characters() -> None:
    d = dialogue()
    d.messages[2].content = "x" * (MAX_ANSWER_CHARS + 1)
    assert codes(d) == {"dialogue_answer_too_long"}
    d.messages[2].content = "Checking\x00"
    assert codes(d) == {"dialogue_invalid_characters"}


def test_tools_list_presence_is_a_dialogue_rule_and_duplicates_a_definition_rule() -> None:
    assert codes(dialogue(tools=[])) >= {"dialogue_missing_field"}
    assert codes(dialogue(tools=[WEATHER, WEATHER])) == {"tool_definition_invalid"}
