"""Tasks over small made-up tools for the retrieval tests: each tool has its own vocabulary, so
which API an instruction needs is plain from its words."""

from __future__ import annotations

from toolfactory.models import Function, Task, Tool

# tool name -> [(function name, description)]
TOOLS: dict[str, list[tuple[str, str]]] = {
    "Weather": [("current_weather", "Current temperature and wind at a city"), ("forecast", "Rain forecast for the next days")],
    "Recipes": [("search_recipes", "Find cooking recipes by ingredient"), ("recipe_nutrition", "Calories of a recipe")],
    "Flights": [("search_flights", "Find airline flights between airports"), ("flight_status", "Departure delay of a flight")],
    "Stocks": [("stock_quote", "Share price of a ticker symbol"), ("dividends", "Dividend history of a company share")],
    "Movies": [("movie_search", "Find films by actor or title"), ("showtimes", "Cinema showtimes of a film")],
    "Translate": [("translate_text", "Translate text into another language"), ("detect_language", "Which language a text is in")],
}

INSTRUCTIONS: dict[str, list[str]] = {
    "current_weather": ["What is the temperature and wind in Oslo right now?", "Is it windy at the city of Lyon today?"],
    "forecast": ["Will there be rain in the next days in Paris?"],
    "search_recipes": ["Find me cooking recipes with the ingredient eggplant."],
    "recipe_nutrition": ["How many calories does the lasagna recipe have?"],
    "search_flights": ["Find airline flights from the airport of Boston to Denver."],
    "flight_status": ["Is flight LH400 delayed at departure?"],
    "stock_quote": ["What is the share price of the ticker AAPL?"],
    "dividends": ["Show the dividend history of the company share MSFT."],
    "movie_search": ["Find films with the actor Tilda Swinton."],
    "showtimes": ["When are the cinema showtimes of the film Dune?"],
    "translate_text": ["Translate this text into the Spanish language."],
    "detect_language": ["Which language is the text 'hyvää huomenta' in?"],
}


def tool(name: str) -> Tool:
    return Tool(
        name=name,
        category="Test",
        functions=[
            Function(name=f, description=d, parameters={"type": "object", "properties": {"q": {"type": "string", "description": "what to look up"}}, "required": ["q"]})
            for f, d in TOOLS[name]
        ],
    )


def tasks() -> list[Task]:
    """One task per instruction, plus a two-tool task (weather for a flight's destination)."""
    tools = {name: tool(name) for name in TOOLS}
    out: list[Task] = []
    for name, functions in TOOLS.items():
        for function, _ in functions:
            for text in INSTRUCTIONS[function]:
                out.append(Task(id=f"t{len(out)}", tools=[tools[name]], instruction=text, relevant_functions=[function]))
    out.append(
        Task(
            id="t-multi",
            tools=[tools["Flights"], tools["Weather"]],
            instruction="Check the departure delay of flight BA1 and the rain forecast at its destination.",
            relevant_functions=["flight_status", "forecast"],
        )
    )
    return out
