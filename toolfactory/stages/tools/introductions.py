"""Documentation from brief introductions (ToolAlpaca §3.1, Appendix A Fig. 5–7).

From an API directory entry (name, link, one-line introduction, category) the designer model
writes, in three steps: a description of the API and its features; the documentation of its
functions; and its OpenAPI 3 document, which keeps what the paper's documents carry: each
function's output description on its success response, and an error response per documented
status (what the error-aware tool executor answers with). Each answer is JSON in a fixed shape (see
:mod:`.fields`); the OpenAPI document is assembled from the third answer and must pass
openapi-spec-validator, cover every documented function and let a user obtain every id a
function needs (a search or list function). An answer that fails is re-asked with the problems
(``llm.max_reasks`` times), then the entry is rejected with the reason. Like the paper, APIs
whose inputs or outputs are not text (images, audio, video, files) are left out.
"""

from __future__ import annotations

import json
import re
from typing import Any

from openapi_spec_validator import validate as validate_openapi
from openapi_spec_validator.validation.exceptions import OpenAPIValidationError

from toolfactory.models import Rejected, Tool
from toolfactory.stages.base import ShardContext
from toolfactory.definitions.validity import definition_problems, lookup_problems
from toolfactory.stages.tools.fields import fields_schema, object_schema, with_field_defs
from toolfactory.definitions.convert import functions_from_openapi
from toolfactory.stages.tools.sources import SourceItem

STAGE = "tools"

DESCRIPTION_PROMPT = """\
I will provide the API's name, link, and brief introduction. You need to generate a detailed
description for the API.
Guidelines:
1. Write a general overview of the API's purpose and functionality.
2. List and briefly describe all features provided by the API, ensuring each feature has a clear
   and distinct purpose with low coupling between them.
3. Use clear, concise language and avoid jargon, keeping the description under 300 tokens.
4. Say whether every input and output of the API is text (`text_only`); it is not when the API
   takes or returns images, audio, video or files.
<API>
Name: AdoptAPet
Link: https://www.adoptapet.com/public/apis/pet_list.html
Introduction: Resource to help get pets adopted
Description: The Adopt-a-Pet.com API is a series of tools that allows partners to use
Adopt-a-Pet.com's pet adoption features and pet data in other applications. It provides the
following features: 1) Retrieve the list of available pets for the shelter or rescue. 2) Retrieve
the details for a specific pet.
</API>
<API>
Name: {name}
Link: {link}
Introduction: {introduction}
</API>"""

FUNCTIONS_PROMPT = """\
You are given the name, link, and description of an API. Your task is to document its functions.
Guidelines:
1. For each function of the API, detail its purpose, input requirements, and output results.
2. Give each input parameter a name, a type, whether it is required, and a brief description.
3. Do not design functions that return excessive data, such as 'getAllXxx'. If such a function is
   necessary, add input parameters to limit, filter, or paginate the results.
4. Limit the number of functions. Only generate functions based on the API description; do not
   create unnecessary functions that overcomplicate the API.
5. If any function requires fields that are not directly accessible to users (like IDs or internal
   codes) as inputs, there must be functions for users to retrieve these values, such as
   'search' or 'list' functions.
6. Name functions in camel case; describe in `output` all the information a function returns.
Name: {name}
Link: {link}
Description: {description}"""

OPENAPI_PROMPT = """\
Please write the OpenAPI specification of the API below, following these guidelines:
1. Name the API with `title`, and give a `version` and a `description` that describe its purpose
   and functionality succinctly.
2. For each function, design one endpoint (method and path) that follows its definition and its
   input and output requirements; use the function's name as `operationId`, and decompose its
   description into `summary` and `description`. A path parameter is written `{{name}}` in the
   path and must be one of the parameters.
3. Complement the function's inputs with details, e.g. `enum` for valid values and `format` for
   dates; give every parameter a description.
4. Describe the successful response in detail in `response`: every returned field, with nested
   `properties` for objects and lists of objects. In `errors`, give the status codes of the errors
   the endpoint returns (e.g. 400 for invalid input, 404 for an unknown id) and when each occurs.
5. If an endpoint needs fields unknown to the user, like IDs, they must be returned by the
   relevant 'search', 'list' or similar endpoints.
6. Cover every function documented below.
Name: {name}
Link: {link}
Description: {description}
Functions:
{functions}"""

DESCRIPTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "description": {"type": "string", "minLength": 20},
        "text_only": {"type": "boolean"},
    },
    "required": ["description", "text_only"],
}

FUNCTIONS_SCHEMA: dict[str, Any] = with_field_defs({
    "type": "object",
    "properties": {
        "functions": {
            "type": "array",
            "minItems": 1,
            "maxItems": 6,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "pattern": "^[a-z][A-Za-z0-9]{2,39}$"},
                    "description": {"type": "string", "minLength": 5},
                    "input": fields_schema(0, 8),
                    "output": {"type": "string", "minLength": 5},
                },
                "required": ["name", "description", "input", "output"],
            },
        }
    },
    "required": ["functions"],
})

_PATH = r"^(/([a-z0-9_.-]+|\{[a-z][a-z0-9_]*\}))+$"
_TEMPLATE = re.compile(r"\{([^{}]+)\}")


ERROR_STATUSES = (400, 401, 403, 404, 409, 422, 429)
# The body of every documented error: what the tool executor answers for one (ToolAlpaca Fig. 11).
ERROR_BODY: dict[str, Any] = {
    "type": "object", "properties": {"error": {"type": "string", "description": "What went wrong"}}, "required": ["error"],
}


def openapi_schema(operation_ids: list[str]) -> dict[str, Any]:
    """The third answer's shape; operation ids are the documented function names."""
    return with_field_defs({
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 1},
            "version": {"type": "string", "minLength": 1},
            "description": {"type": "string", "minLength": 10},
            "operations": {
                "type": "array",
                "minItems": len(operation_ids),
                "maxItems": len(operation_ids),
                "items": {
                    "type": "object",
                    "properties": {
                        "operationId": {"enum": operation_ids},
                        "method": {"enum": ["get", "post", "put", "patch", "delete"]},
                        "path": {"type": "string", "pattern": _PATH},
                        "summary": {"type": "string", "minLength": 3},
                        "description": {"type": "string", "minLength": 5},
                        "parameters": fields_schema(0, 8),
                        "response": fields_schema(1, 10),
                        "errors": {
                            "type": "array", "minItems": 1, "maxItems": 4,
                            "items": {"type": "object",
                                      "properties": {"status": {"enum": list(ERROR_STATUSES)}, "description": {"type": "string", "minLength": 5}},
                                      "required": ["status", "description"]},
                        },
                    },
                    "required": ["operationId", "method", "path", "summary", "description", "parameters", "response", "errors"],
                },
            },
        },
        "required": ["title", "version", "description", "operations"],
    })


def entry_of(raw: Any) -> dict[str, str]:
    """(name, link, introduction, category) of a directory entry: ToolAlpaca's public_apis
    layout (`API`, `Description`, `Link`, `Category`) or toolfactory's own (lower case)."""
    if not isinstance(raw, dict):
        raise ValueError("an introduction entry must be a mapping")
    entry = {
        "name": str(raw.get("name") or raw.get("API") or "").strip(),
        "link": str(raw.get("link") or raw.get("Link") or "").strip(),
        "introduction": str(raw.get("introduction") or raw.get("Description") or "").strip(),
        "category": str(raw.get("category") or raw.get("Category") or "General").strip(),
    }
    if not entry["name"] or not entry["introduction"]:
        raise ValueError("an introduction entry needs a name and an introduction")
    return entry


async def document_entry(item: SourceItem, ctx: ShardContext) -> list[Tool | Rejected]:
    """The tool documented from one entry, or the entry rejected with its reason."""
    try:
        entry = entry_of(item.raw)
    except ValueError as exc:
        return [Rejected(id=item.id, stage=STAGE, reasons=["tool_malformed"], detail=str(exc), record=item.model_dump())]
    gateway = ctx.gateway
    about = await gateway.structured(
        "designer", [{"role": "user", "content": DESCRIPTION_PROMPT.format(**entry)}], DESCRIPTION_SCHEMA, name="api_description"
    )
    if not about["text_only"]:
        return [Rejected(id=item.id, stage=STAGE, reasons=["tool_non_text_io"], record=item.model_dump(),
                         detail=f"{entry['name']}: inputs or outputs are not text (images, audio, video or files)")]
    documented = await gateway.structured(
        "designer",
        [{"role": "user", "content": FUNCTIONS_PROMPT.format(**entry, description=about["description"])}],
        FUNCTIONS_SCHEMA,
        name="function_documentation",
        check=_distinct_functions,
    )
    names = [fn["name"] for fn in documented["functions"]]
    built: dict[str, Tool] = {}

    def check(answer: dict[str, Any]) -> list[tuple[str, str]]:
        problems, document = assemble_openapi(answer, entry, outputs)
        if problems:
            return problems
        tool = Tool(
            name=entry["name"],
            description=about["description"],
            introduction=entry["introduction"],
            link=entry["link"],
            category=entry["category"],
            domain_path=[entry["category"]],
            source="generated",
            provenance={"generated_from": "introduction"},
            functions=functions_from_openapi(document),
            openapi=document,
        )
        problems = definition_problems(tool) + lookup_problems(tool)
        if not problems:
            built["tool"] = tool
        return problems

    outputs = {fn["name"]: fn["output"] for fn in documented["functions"]}
    await gateway.structured(
        "designer",
        [{"role": "user", "content": OPENAPI_PROMPT.format(
            **entry, description=about["description"], functions=json.dumps(documented["functions"], indent=1))}],
        openapi_schema(names),
        name="openapi_specification",
        check=check,
    )
    return [built["tool"]]


def _distinct_functions(answer: dict[str, Any]) -> list[tuple[str, str]]:
    names = [fn["name"] for fn in answer["functions"]]
    twice = sorted({name for name in names if names.count(name) > 1})
    return [("tool_duplicate_function", f"function names used twice: {twice}")] if twice else []


def assemble_openapi(answer: dict[str, Any], entry: dict[str, str],
                     outputs: dict[str, str] | None = None) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """The OpenAPI 3 document of a third-step answer, and its problems (empty when it validates).

    A parameter named in the path template is a path parameter; the others are query
    parameters of GET and DELETE and the JSON request body of the other methods. As in the
    paper's documents, the success response is described by the function documentation's
    output (`outputs`, by function name), and every documented error status has its response
    (a 400 for invalid input at least).
    """
    problems: list[tuple[str, str]] = []
    paths: dict[str, dict[str, Any]] = {}
    for op in answer["operations"]:
        where = op["operationId"]
        in_path = set(_TEMPLATE.findall(op["path"]))
        operation: dict[str, Any] = {"operationId": where, "summary": op["summary"], "description": op["description"]}
        parameters, body = [], []
        for field in op["parameters"]:
            if field["name"] in in_path:
                schema = object_schema([{**field, "required": True}], where, problems)["properties"][field["name"]]
                parameters.append({"name": field["name"], "in": "path", "required": True,
                                   "description": field["description"], "schema": schema})
            elif op["method"] in ("get", "delete"):
                schema = object_schema([field], where, problems)["properties"][field["name"]]
                parameters.append({"name": field["name"], "in": "query", "required": bool(field["required"]),
                                   "description": field["description"], "schema": schema})
            else:
                body.append(field)
        names = [p["name"] for p in parameters] + [f["name"] for f in body]
        if len(names) != len(set(names)):
            problems.append(("tool_duplicate_parameter", f"{where}: a parameter name is used twice"))
        if parameters:
            operation["parameters"] = parameters
        if body:
            operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": object_schema(body, where, problems)}}}
        output = (outputs or {}).get(where) or "Successful response"
        operation["responses"] = {
            "200": {"description": output,
                    "content": {"application/json": {"schema": object_schema(op["response"], f"{where} response", problems)}}},
        }
        errors = {str(e["status"]): e["description"] for e in op.get("errors") or []}
        for status, description in sorted({"400": "Invalid input", **errors}.items()):
            operation["responses"][status] = {"description": description, "content": {"application/json": {"schema": ERROR_BODY}}}
        if op["method"] in paths.get(op["path"], {}):
            problems.append(("tool_openapi_invalid", f"{op['method'].upper()} {op['path']} is used by two operations"))
        paths.setdefault(op["path"], {})[op["method"]] = operation
    # Operation ids are an enum of the documented names and their number is fixed, so every
    # function is covered exactly when no id appears twice.
    ids = [op["operationId"] for op in answer["operations"]]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        problems.append(("tool_openapi_incomplete", f"operations {twice} appear twice, so others are missing"))
    document = {
        "openapi": "3.0.3",
        "info": {"title": answer["title"], "version": answer["version"], "description": answer["description"]},
        "servers": [{"url": entry["link"] or "https://api.example.com"}],
        "paths": paths,
    }
    try:
        validate_openapi(document)
    except OpenAPIValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        problems.append(("tool_openapi_invalid", f"invalid OpenAPI at {where}: {exc.message}"))
    except ValueError as exc:  # the validator's own path-template parser
        problems.append(("tool_openapi_invalid", f"invalid OpenAPI: {exc}"))
    return problems, document
