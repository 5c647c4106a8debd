"""Data checks of the ToolLLM-style seed pool (toolfactory/catalog/instruction_seeds.yaml)."""

from __future__ import annotations

import random
import re

import pytest

from toolfactory.catalog.seeds import InstructionSeeds, Seed, SeedQuery, SeedTool, load_instruction_seeds, render_seed

# What the A.7 prompt forbids ("not 'an address', not 'a product', not 'my company'") and the
# other ways a query can leave a value for the model to make up.
PLACEHOLDER_PHRASES = (
    "a product", "an item", "some product", "this product",
    "my company", "our company", "a company", "some company", "this company",
    "a city", "some city", "this city", "a place", "some place", "this place", "somewhere",
    "an address", "my address", "this address", "a location", "some location", "this location",
    "a country", "a date", "some date", "a certain", "a stock", "some stock", "a hotel", "a restaurant",
    "xxx", "placeholder", "tbd",
)
PLACEHOLDER = re.compile(r"\b(" + "|".join(map(re.escape, PLACEHOLDER_PHRASES)) + r")\b|[<>{}]", re.IGNORECASE)
WHICH_API = re.compile(r"\b(which|what) (api|function|endpoint|tool)s?\b", re.IGNORECASE)


@pytest.fixture(scope="module")
def seeds() -> InstructionSeeds:
    return load_instruction_seeds()


def _all(seeds: InstructionSeeds) -> list[Seed]:
    return seeds.single_tool + seeds.multi_tool


def _queries(seeds: InstructionSeeds) -> list[tuple[Seed, SeedQuery]]:
    return [(seed, query) for seed in _all(seeds) for query in seed.queries]


def test_the_pool_has_the_papers_sizes(seeds):
    assert len(seeds.single_tool) == 12
    assert len(seeds.multi_tool) == 36


def test_single_tool_seeds_have_one_tool_with_three_to_six_apis(seeds):
    for seed in seeds.single_tool:
        assert len(seed.tools) == 1
        assert 3 <= len(seed.tools[0].apis) <= 6, seed.tools[0].name


def test_multi_tool_seeds_have_two_to_four_tools_with_one_to_four_apis(seeds):
    for seed in seeds.multi_tool:
        assert 2 <= len(seed.tools) <= 4, seed.tool_names()
        for tool in seed.tools:
            assert 1 <= len(tool.apis) <= 4, tool.name


def test_every_seed_has_two_or_three_queries(seeds):
    for seed in _all(seeds):
        assert 2 <= len(seed.queries) <= 3, seed.tool_names()


def test_relevant_apis_come_from_the_seeds_own_api_list(seeds):
    for seed, query in _queries(seeds):
        assert set(query.relevant_apis) <= seed.api_pairs(), query.query


def test_every_query_needs_several_apis(seeds):
    for _, query in _queries(seeds):
        assert len(set(query.relevant_apis)) >= 2, query.query


def test_multi_tool_queries_need_apis_of_two_tools(seeds):
    for seed in seeds.multi_tool:
        for query in seed.queries:
            assert len({tool for tool, _ in query.relevant_apis}) >= 2, query.query


def test_queries_of_a_seed_need_different_api_sets(seeds):
    for seed in _all(seeds):
        api_sets = [frozenset(query.relevant_apis) for query in seed.queries]
        assert len(set(api_sets)) == len(api_sets), seed.tool_names()


def test_every_api_of_a_seed_is_needed_by_some_query(seeds):
    # A seed shows the model how to cover the APIs it is given; an unused API teaches nothing.
    for seed in _all(seeds):
        used = {pair for query in seed.queries for pair in query.relevant_apis}
        assert used == seed.api_pairs(), sorted(seed.api_pairs() - used)


def test_no_query_names_an_api(seeds):
    for seed, query in _queries(seeds):
        text = query.query.lower()
        for _, api in seed.api_pairs():
            if len(api) > 4:
                assert api.lower() not in text, (api, query.query)
        assert not WHICH_API.search(query.query), query.query


def test_no_query_leaves_a_value_to_be_made_up(seeds):
    for _, query in _queries(seeds):
        assert not PLACEHOLDER.search(query.query), (PLACEHOLDER.search(query.query), query.query)


def test_every_query_names_something_concrete(seeds):
    # A number, or a capitalised word that does not start a sentence and is not "I".
    for _, query in _queries(seeds):
        has_number = re.search(r"\d", query.query)
        proper_nouns = re.findall(r"(?<![.!?]\s)(?<!^)\b[A-Z][\w'&-]*", query.query)
        assert has_number or [word for word in proper_nouns if word not in {"I", "I'm", "I'd", "I've"}], query.query


def test_the_pool_has_long_scenarios(seeds):
    long_queries = [query for _, query in _queries(seeds) if len(query.query) >= 400]
    assert len(long_queries) >= 15


def test_tool_sets_are_distinct_across_seeds(seeds):
    tool_sets = [seed.tool_names() for seed in _all(seeds)]
    assert len(set(tool_sets)) == len(tool_sets)


def test_a_tool_name_always_means_the_same_apis(seeds):
    apis_by_tool: dict[str, list[str]] = {}
    for seed in _all(seeds):
        for tool in seed.tools:
            assert apis_by_tool.setdefault(tool.name, tool.apis) == tool.apis, tool.name


def test_render_seed_contains_every_api_name_and_query(seeds):
    for seed in _all(seeds):
        text = render_seed(seed)
        for tool in seed.tools:
            assert tool.name in text
            for api in tool.apis:
                assert api in text
        for query in seed.queries:
            assert " ".join(query.query.split()) in text


def test_render_seed_follows_the_a7_wording():
    single = Seed(
        tools=[SeedTool(name="Tide", apis=["Get Tides", "Get Stations"])],
        queries=[SeedQuery(query="Tides at Brest on 3 May?", relevant_apis=[("Tide", "Get Tides"), ("Tide", "Get Stations")])],
    )
    multi = Seed(
        tools=[SeedTool(name="A", apis=["x"]), SeedTool(name="B", apis=["y"])],
        queries=[SeedQuery(query="Do x and y for Oslo.", relevant_apis=[("A", "x"), ("B", "y")])],
    )
    assert render_seed(single) == (
        'For example, with tool "Tide", given the api_names are "Get Tides", "Get Stations".\n'
        "Some sample queries and related_apis would be:\n"
        '"query": "Tides at Brest on 3 May?", "related_apis": ["Get Tides", "Get Stations"]'
    )
    assert render_seed(multi) == (
        'For example, with tools ["A", "B"], given the api_names are (tool "A") "x", (tool "B") "y".\n'
        "Some sample queries and related_apis would be:\n"
        '"query": "Do x and y for Oslo.", "related_apis": [["A", "x"], ["B", "y"]]'
    )


def test_a_seed_naming_an_api_it_does_not_offer_is_rejected():
    with pytest.raises(ValueError, match="does not offer"):
        Seed(
            tools=[SeedTool(name="A", apis=["x"])],
            queries=[SeedQuery(query="Do z.", relevant_apis=[("A", "z")])],
        )


def test_sample_draws_three_distinct_seeds_from_the_matching_pool(seeds):
    drawn = seeds.sample(random.Random(7), multi_tool=True)
    assert len(drawn) == 3 and len({seed.tool_names() for seed in drawn}) == 3
    assert all(seed in seeds.multi_tool for seed in drawn)
    assert all(seed in seeds.single_tool for seed in seeds.sample(random.Random(7), multi_tool=False))
