"""Function names mapped for OpenAI's API in the OpenAI export."""

from __future__ import annotations

from toolfactory.export.names import openai_name, original_name
from toolfactory.definitions.validity import OPENAI_NAME


def test_names_openai_accepts_are_kept() -> None:
    assert openai_name("get_weather-v2") == "get_weather-v2"


def test_a_dotted_name_maps_to_an_accepted_name_and_back() -> None:
    mapped = openai_name("math.factorial")
    assert OPENAI_NAME.match(mapped) and original_name(mapped, ["math_factorial", "math.factorial"]) == "math.factorial"


def test_two_originals_that_differ_only_in_punctuation_stay_apart() -> None:
    assert openai_name("a.b") != openai_name("a:b") and openai_name("a.b") != "a_b"


def test_a_long_name_is_cut_to_64_characters() -> None:
    assert len(openai_name("x." * 60)) == 64
