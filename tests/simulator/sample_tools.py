"""Function tools shared by the HTTP tests (OpenAI `tools` format)."""

from __future__ import annotations

from typing import Any

WEATHER_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather forecast for a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "units": {"type": "string", "enum": ["metric", "imperial"]},
                    "days": {"type": "integer", "minimum": 1, "maximum": 7},
                },
                "required": ["city", "days"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search_flights",
            "description": "Search flights between two airports on a date",
            "parameters": {
                "type": "object",
                "properties": {
                    "origin": {"type": "string"},
                    "destination": {"type": "string"},
                    "date": {"type": "string", "format": "date"},
                    "passengers": {"type": "integer", "minimum": 1, "maximum": 9},
                    "cabin": {"type": "string", "enum": ["economy", "business"]},
                },
                "required": ["origin", "destination", "date"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "convert_currency",
            "description": "Convert an amount of money from one currency to another",
            "parameters": {
                "type": "object",
                "properties": {
                    "amount": {"type": "number", "exclusiveMinimum": 0},
                    "from_currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
                    "to_currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
                },
                "required": ["amount", "from_currency", "to_currency"],
            },
        },
    },
]


def tool_parameters(name: str) -> dict[str, Any]:
    """The parameters schema of one of WEATHER_TOOLS."""
    return next(t["function"]["parameters"] for t in WEATHER_TOOLS if t["function"]["name"] == name)

HOTEL_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "search_hotels",
            "description": "Search hotels in a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "nights": {"type": "integer", "minimum": 1, "maximum": 14},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "book_hotel",
            "description": "Book a room in a hotel by its id",
            "parameters": {
                "type": "object",
                "properties": {
                    "hotel_id": {"type": "string", "pattern": "^H[0-9]+$"},
                    "guests": {"type": "integer", "minimum": 1, "maximum": 4},
                },
                "required": ["hotel_id", "guests"],
                "additionalProperties": False,
            },
        },
    },
]


def parameters_of(tools: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The parameters schema of the function `name` among `tools`."""
    return next(t["function"]["parameters"] for t in tools if t["function"]["name"] == name)
