"""The data flow between offered functions that a dependent request is built on."""

from __future__ import annotations

from typing import Any

from toolfactory.catalog import load_seed_catalog
from toolfactory.models import Function
from toolfactory.stages.tasks.data_flow import Link, links


def fn(name: str, required: dict[str, dict[str, Any]], returns: dict[str, Any] | None = None) -> Function:
    return Function(name=name, description=f"{name}.", parameters={"type": "object", "properties": required, "required": list(required)},
                    returns=returns or {"type": "object"})


ALERTS = {"type": "object", "properties": {"alerts": {"type": "array", "items": {"type": "object", "properties": {
    "id": {"type": "string"}, "event": {"type": "string"}}}}}}


def test_a_parameter_documented_as_another_function_s_result_is_a_link() -> None:
    later = fn("get_alert", {"ref": {"type": "string", "description": "Reference as returned by list_alerts."}})
    assert links([fn("list_alerts", {"country": {"type": "string"}}), later]) == [Link("list_alerts", "get_alert", "ref")]


def test_a_result_field_of_the_parameter_s_name_is_a_link_also_an_id_inside_a_field_named_after_it() -> None:
    listing = fn("list_alerts", {"country": {"type": "string"}}, ALERTS)
    assert links([listing, fn("get_alert", {"alert_id": {"type": "string"}})]) == [Link("list_alerts", "get_alert", "alert_id")]
    assert links([listing, fn("get_event", {"event": {"type": "string"}})]) == [Link("list_alerts", "get_event", "event")]
    # Names compare without case or separators.
    assert links([listing, fn("getAlert", {"alertId": {"type": "string"}})]) == [Link("list_alerts", "getAlert", "alertId")]


def test_no_link_where_the_value_comes_from_the_user_or_nowhere() -> None:
    listing = fn("list_alerts", {"country": {"type": "string"}}, ALERTS)
    # Both take the country from the user: the earlier result does not feed it.
    assert links([listing, fn("get_forecast", {"country": {"type": "string"}})]) == []
    assert links([listing, fn("get_quote", {"symbol": {"type": "string"}})]) == []
    assert links([fn("solve", {"equation": {"type": "string"}}, {"type": "object", "properties": {"steps": {"type": "array"}}})]) == []


def test_the_catalog_s_chained_apis_are_found() -> None:
    by_name = {tool.name: tool for tool in load_seed_catalog()}
    assert Link("list_active_alerts", "get_alert", "alert_id") in links(by_name["SevereWeatherAlerts"].functions)
    assert Link("search_symbols", "get_quote", "symbol") in links(by_name["StockQuoteHub"].functions)
    assert links(by_name["MathSolver"].functions) == []


def test_an_identifier_is_told_by_its_last_word() -> None:
    assert Link("a", "b", "alert_id").carries_id and Link("a", "b", "medicationIds").carries_id
    assert not Link("a", "b", "paid").carries_id and not Link("a", "b", "valid").carries_id
