"""Tool descriptions as XML whose elements follow the JSON Schema, written and read with
:mod:`xml.etree.ElementTree`::

    <tools>
      <function name="get_forecast" method="GET" path="/v1/forecast">
        <description>Get a daily weather forecast.</description>
        <parameters type="object">
          <properties>
            <property name="location" type="string" required="true">
              <description>City name.</description>
            </property>
            <property name="days" type="integer" minimum="1" maximum="16">
              <default>7</default>
            </property>
            <property name="units" type="string" default="metric">
              <enum>["metric", "imperial"]</enum>
            </property>
          </properties>
        </parameters>
      </function>
    </tools>

How a schema keyword is written (and so read back, losslessly):

* a string value is an attribute (``type="string"``, ``default="metric"``); numeric keywords
  (``minimum``, ``maxLength``, ...) with a number value are attributes too and read back as
  numbers. Every other attribute reads back as a string;
* ``description`` is the text of a ``<description>`` element (``encoding="json"`` and a JSON
  literal when the text holds a carriage return or a character XML cannot carry, or is no string;
  a function's name, method or path with such a character is an element of that kind too);
* subschemas are elements of the same shape: ``<properties>`` holds a ``<property name=…>`` per
  property, in order; ``anyOf``/``oneOf``/``allOf``/``prefixItems`` hold ``<schema>`` elements;
  ``patternProperties``/``definitions``/``dependentSchemas`` hold ``<schema name=…>``; ``items``,
  ``additionalProperties``, ``not``, ... are one schema element (a non-object value such as
  ``false`` is its JSON text);
* ``required`` becomes ``required="true"`` on its properties when that says the same thing (the
  listed names are properties, in property order); otherwise it is kept as ``<required>[…]</required>``;
* anything else is an element holding the value as JSON text (``<default>7</default>``,
  ``<enum>["a", "b"]</enum>``); a keyword that is not an XML name (``$ref``) or is used with a shape
  its element cannot hold is ``<keyword name="$ref">"#/…"</keyword>``; a schema with a keyword no
  attribute can carry (a control character) is its JSON text as a whole.

Only the order of keywords inside a schema object is not kept (attributes come first).
"""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET
from typing import Any

from toolfactory.render.errors import ToolFormatError
from toolfactory.render.parsed import json_value

NAME = "xml"
NUMERIC = frozenset({
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength",
    "minItems", "maxItems", "minProperties", "maxProperties", "minContains", "maxContains",
})
SINGLE = frozenset({
    "items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else",
    "additionalItems", "unevaluatedItems", "unevaluatedProperties", "contentSchema",
})
LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
MAPS = frozenset({"properties", "patternProperties", "definitions", "dependentSchemas"})
STRUCTURE = SINGLE | LISTS | MAPS | {"description", "keyword"}
RESERVED_ATTRIBUTES = frozenset({"name", "required"})  # set by the parent, not keywords of the schema
XML_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
NOT_IN_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
NOT_IN_XML_TEXT = re.compile("[^\t\n\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")  # + \r, which parsers fold into \n


def _is_xml_name(key: str) -> bool:
    return bool(XML_NAME.fullmatch(key)) and not key.lower().startswith("xml")


def _attribute_safe(value: str) -> bool:
    return not NOT_IN_XML.search(value)


def _json(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return json.dumps(value) if NOT_IN_XML.search(text) else text


# -- writing ---------------------------------------------------------------------------------


def _as_attribute(key: str, value: Any) -> str | None:
    if not _is_xml_name(key) or key in RESERVED_ATTRIBUTES or key == "description":
        return None
    if key in NUMERIC:
        number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        return json.dumps(value) if number else None
    return value if isinstance(value, str) and _attribute_safe(value) else None


def _text_element(parent: ET.Element, tag: str, value: Any) -> ET.Element:
    element = ET.SubElement(parent, tag)
    if isinstance(value, str) and not NOT_IN_XML_TEXT.search(value):
        element.text = value
    else:
        element.set("encoding", "json")
        element.text = _json(value)
    return element


def _literal_element(parent: ET.Element, key: str, value: Any) -> None:
    if _is_xml_name(key) and key not in STRUCTURE:
        element = ET.SubElement(parent, key)
    else:
        element = ET.SubElement(parent, "keyword", {"name": key})
    element.text = _json(value)


def _flags_required(schema: dict[str, Any]) -> bool:
    """Whether `required` can be said with required="true" on the properties."""
    required, properties = schema.get("required"), schema.get("properties")
    if not isinstance(required, list) or not required or not isinstance(properties, dict) or not _writes_as_map(properties):
        return False
    return required == [name for name in properties if name in required]


def _writes_as_map(value: Any) -> bool:
    return isinstance(value, dict) and all(_attribute_safe(k) for k in value)


def _schema_into(element: ET.Element, schema: Any) -> None:
    """Write `schema` (any JSON value) as the content of `element`."""
    if not isinstance(schema, dict) or not all(_attribute_safe(key) for key in schema):
        # A boolean schema (additionalProperties: false), or keywords XML cannot name even in an
        # attribute: the value as JSON text, which reads back as the same value.
        element.text = _json(schema)
        return
    flags = _flags_required(schema)
    done = {"required"} if flags else set()
    for key, value in schema.items():
        attribute = _as_attribute(key, value)
        if attribute is not None:
            element.set(key, attribute)
            done.add(key)
    # The description first: it is what a reader looks for before the constraints.
    for key, value in sorted(schema.items(), key=lambda item: item[0] != "description"):
        if key in done:
            continue
        if key == "description":
            _text_element(element, "description", value)
        elif key in SINGLE:
            _schema_into(ET.SubElement(element, key), value)
        elif key in LISTS and isinstance(value, list):
            wrapper = ET.SubElement(element, key)
            for item in value:
                _schema_into(ET.SubElement(wrapper, "schema"), item)
        elif key in MAPS and _writes_as_map(value):
            wrapper = ET.SubElement(element, key)
            child_tag = "property" if key == "properties" else "schema"
            for name, item in value.items():
                child = ET.SubElement(wrapper, child_tag, {"name": name})
                _schema_into(child, item)
                if flags and key == "properties" and name in schema["required"]:
                    child.set("required", "true")
        else:
            _literal_element(element, key, value)


def render(functions: list[dict[str, Any]]) -> str:
    root = ET.Element("tools")
    for fields in functions:
        labels = {k: fields[k] for k in ("name", "method", "path") if k in fields}
        function = ET.SubElement(root, "function", {k: v for k, v in labels.items() if _attribute_safe(v)})
        for key, value in labels.items():
            if function.get(key) is None:  # characters no attribute can carry: a JSON-encoded element
                _text_element(function, key, value)
        _text_element(function, "description", fields["description"])
        _schema_into(ET.SubElement(function, "parameters"), fields["parameters"])
        if "returns" in fields:
            _schema_into(ET.SubElement(function, "returns"), fields["returns"])
    ET.indent(root)
    return ET.tostring(root, encoding="unicode")


# -- reading ---------------------------------------------------------------------------------


def _literal(element: ET.Element, where: str) -> Any:
    return json_value((element.text or "").strip(), NAME, f"{where} <{element.tag}>", ToolFormatError)


def _text(element: ET.Element, where: str) -> Any:
    if element.get("encoding") == "json":
        return _literal(element, where)
    if len(element):
        raise ToolFormatError(NAME, f"{where}: <{element.tag}> holds text, not elements")
    return element.text or ""


def _schema(element: ET.Element, where: str) -> Any:
    """The schema (any JSON value) an element holds; `where` names it in messages."""
    attributes = {k: v for k, v in element.attrib.items() if k not in RESERVED_ATTRIBUTES}
    text = (element.text or "").strip()
    if not attributes and not len(element):
        return json_value(text, NAME, where, ToolFormatError) if text else {}
    if text:
        raise ToolFormatError(NAME, f"{where}: text {text[:40]!r} beside schema keywords")
    schema: dict[str, Any] = {}
    for key, value in attributes.items():
        schema[key] = _number(value, key, where) if key in NUMERIC else value
    flagged: list[str] = []
    for child in element:
        key = child.get("name") if child.tag == "keyword" else child.tag
        if key is None:
            raise ToolFormatError(NAME, f"{where}: <keyword> without a name attribute")
        if key in schema:
            raise ToolFormatError(NAME, f"{where}: the keyword {key!r} is given twice")
        inner = f"{where}/{key}"
        if child.tag == "description":
            schema[key] = _text(child, inner)
        elif child.tag in SINGLE:
            schema[key] = _schema(child, inner)
        elif child.tag in LISTS:
            schema[key] = [_schema(item, f"{inner}[{i}]") for i, item in enumerate(_children(child, "schema", inner))]
        elif child.tag in MAPS:
            schema[key] = _map(child, inner, flagged)
        else:
            schema[key] = _literal(child, where)
    if flagged:
        if "required" in schema:
            raise ToolFormatError(NAME, f"{where}: both required=\"true\" properties and a <required> list")
        schema["required"] = flagged
    return schema


def _number(text: str, key: str, where: str) -> Any:
    value = json_value(text, NAME, f"{where}: the {key} attribute", ToolFormatError)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ToolFormatError(NAME, f"{where}: the {key} attribute must be a number, not {text!r}")
    return value


def _children(element: ET.Element, tag: str, where: str) -> list[ET.Element]:
    wrong = next((c.tag for c in element if c.tag != tag), None)
    if wrong is not None:
        raise ToolFormatError(NAME, f"{where}: expected <{tag}> elements, found <{wrong}>")
    return list(element)


def _map(element: ET.Element, where: str, flagged: list[str]) -> dict[str, Any]:
    tag = "property" if element.tag == "properties" else "schema"
    out: dict[str, Any] = {}
    for child in _children(element, tag, where):
        name = child.get("name")
        if name is None:
            raise ToolFormatError(NAME, f"{where}: a <{tag}> without a name attribute")
        if name in out:
            raise ToolFormatError(NAME, f"{where}: {name!r} appears twice")
        required = child.get("required")
        if required is not None:
            if tag != "property" or required != "true":
                raise ToolFormatError(NAME, f"{where}/{name}: required must be \"true\" and only on a <property>")
            flagged.append(name)
        out[name] = _schema(child, f"{where}/{name}")
    return out


def parse(text: str) -> list[dict[str, Any]]:
    """The functions' fields of an XML description (validated by the caller)."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ToolFormatError(NAME, f"not well-formed XML: {exc}") from None
    if root.tag != "tools":
        raise ToolFormatError(NAME, f"the root element must be <tools>, not <{root.tag}>")
    functions = []
    for i, function in enumerate(_children(root, "function", "<tools>")):
        where = f"function {i} ({function.get('name')})"
        unknown = sorted(set(function.attrib) - {"name", "method", "path"})
        if unknown:
            raise ToolFormatError(NAME, f"{where}: unexpected attribute(s) {', '.join(unknown)}")
        fields: dict[str, Any] = dict(function.attrib)
        for child in function:
            if child.tag in fields:
                raise ToolFormatError(NAME, f"{where}: <{child.tag}> is given twice")
            if child.tag in ("description", "name", "method", "path"):
                fields[child.tag] = _text(child, where)
            elif child.tag in ("parameters", "returns"):
                fields[child.tag] = _schema(child, f"{where}: {child.tag}")
            else:
                raise ToolFormatError(NAME, f"{where}: unexpected element <{child.tag}>")
        functions.append(fields)
    return functions
