"""The configuration reference, generated from the pydantic models of ``toolfactory.config``.

Every section and field of :class:`~toolfactory.config.Config` is written with its type, its
constraints, its default (as a run gets it, so a role's and the simulator's own defaults show) and
its attribute docstring, so the page cannot drift from the code.
"""

from __future__ import annotations

import importlib
import json
import typing
from dataclasses import dataclass, field
from typing import Any, Iterator

from pydantic import BaseModel

from prose import bounds_text, code, paragraphs, type_text

ROLE_KEY = "<role>"


@dataclass
class Entry:
    """One field: its dotted path, as `--set` takes it, and what the page says of it."""

    path: str
    type: str
    default: str
    description: str
    settable: bool = True


@dataclass
class SectionDoc:
    """One section of the config (a pydantic model), with its own fields; subsections follow it."""

    path: str
    description: str
    entries: list[Entry] = field(default_factory=list)


def _model_in(annotation: Any) -> tuple[str, type[BaseModel]] | None:
    """('', M) for a model field, ('<key>', M) for a mapping of models, ('[]', M) for a list of them."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "", annotation
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is dict and len(args) == 2 and isinstance(args[1], type) and issubclass(args[1], BaseModel):
        return "." + ROLE_KEY if args[0] is not str else ".<name>", args[1]
    if origin is list and args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
        return "[]", args[0]
    return None


def _settings_of(metadata: list[Any]) -> tuple[str, type[BaseModel]] | None:
    """('', M) for a mapping the config passes to a program that validates it with M
    (toolfactory.config.llm.SettingsOf names M by import path; the page imports it)."""
    for item in metadata:
        target = getattr(item, "model", None)
        if isinstance(target, str) and ":" in target:
            module, _, name = target.partition(":")
            return "", getattr(importlib.import_module(module), name)
    return None


def _default(value: Any) -> str:
    return code(json.dumps(value, ensure_ascii=False, default=str))


def sections(model: type[BaseModel], instance: BaseModel | None, path: str = "",
             description: str = "") -> Iterator[SectionDoc]:
    """The sections of `model` depth-first, `instance` giving the defaults a run gets."""
    own = SectionDoc(path, description or " ".join(paragraphs(model.__doc__)))
    nested: list[tuple[str, type[BaseModel], BaseModel | None, str]] = []
    for name, info in model.model_fields.items():
        dotted = f"{path}.{name}" if path else name
        doc = " ".join(paragraphs(info.description))
        passed_on = _settings_of(info.metadata)
        inner = _model_in(info.annotation) or passed_on
        if inner is not None:
            suffix, sub = inner
            value = getattr(instance, name, None) if instance is not None else None
            sub_instance = value if suffix == "" and isinstance(value, BaseModel) else None
            if passed_on and isinstance(value, dict):  # validated by another program: its defaults as a run gets them
                sub_instance = sub(**value)
            if suffix and sub_instance is None:
                sub_instance = _defaults_of(sub)
            nested.append((dotted + suffix, sub, sub_instance, doc or " ".join(paragraphs(sub.__doc__))))
            continue
        if instance is not None:
            default = _default(getattr(instance, name) if not isinstance(getattr(instance, name), BaseModel)
                               else getattr(instance, name).model_dump(mode="json"))
        elif info.is_required():
            default = "required"
        else:
            default = _default(_dumped(info.get_default(call_default_factory=True)))
        kind = type_text(info.annotation)
        bounds = bounds_text(info.metadata)
        own.entries.append(Entry(dotted, f"{kind}, {bounds}" if bounds else kind, default, doc,
                                 settable="[]" not in dotted))
    if own.path:
        yield own
    for sub_path, sub, sub_instance, doc in nested:
        yield from sections(sub, sub_instance, sub_path, doc)


def _defaults_of(model: type[BaseModel]) -> BaseModel | None:
    """The model with its defaults, or None when it has required fields (a list item's)."""
    try:
        return model()
    except Exception:  # noqa: BLE001 - required fields: the entries then say "required"
        return None


def _dumped(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def env_name(path: str) -> str:
    """The environment variable that sets `path` (``TOOLFACTORY_<SECTION>__<FIELD>``)."""
    return "TOOLFACTORY_" + path.replace(ROLE_KEY, "<ROLE>").replace(".", "__").upper()


def anchor(path: str) -> str:
    """The page's anchor of a field or section (`llm.roles.role.model`)."""
    return path.replace("<", "").replace(">", "").replace("[]", "")


def role_defaults() -> dict[str, dict[str, Any]]:
    """The fields each role sets apart from a role's defaults (ROLE_DEFAULTS, as a run gets them)."""
    from toolfactory.config import Config, RoleConfig

    generic = RoleConfig().model_dump(mode="json")
    return {role: {k: v for k, v in spec.model_dump(mode="json").items() if generic.get(k) != v}
            for role, spec in Config().llm.roles.items()}


def page() -> str:
    """The whole Markdown page."""
    import toolfactory.config as config_module
    from toolfactory.config import Config

    found = list(sections(Config, Config()))
    lines = [
        "# Configuration reference",
        "",
        "Generated from the pydantic models of `toolfactory/config/` (one module per section) each time the site is built:",
        "every section and field, with its type, constraints, default and documentation. "
        "The defaults are the ones a run gets when the field is not set. "
        "See [Configuration](../guide/configuration.md) for how a config is written and checked.",
        "",
        *[p + "\n" for p in paragraphs(config_module.__doc__)],
        "## Sections",
        "",
        *[f"- [{code(s.path)}](#{anchor(s.path)}): {_summary(s.description)}" for s in found],
        "",
    ]
    for section in found:
        lines += [f"## {code(section.path)} {{#{anchor(section.path)}}}", "", section.description, ""]
        if section.path.endswith(ROLE_KEY):
            lines += _role_table()
        for entry in section.entries:
            where = [entry.type, f"default {entry.default}"]
            if entry.settable:
                where.append(f"env {code(env_name(entry.path))}")
            lines += [f"### {code(entry.path)} {{#{anchor(entry.path)}}}", "", " · ".join(where), "",
                      entry.description or "(undocumented)", ""]
    return "\n".join(lines)


def _summary(description: str) -> str:
    sentence = description.split(". ")[0].rstrip(".")
    return sentence + "." if sentence else ""


def _role_table() -> list[str]:
    rows = ["The roles are `" + "`, `".join(role_defaults()) + "`. Each starts from the defaults below; "
            "these roles set some fields apart:", "", "| role | its own defaults |", "| --- | --- |"]
    for role, own in role_defaults().items():
        rows.append(f"| `{role}` | " + (", ".join(f"`{k}: {json.dumps(v)}`" for k, v in own.items()) or "none") + " |")
    return rows + [""]


def every_field_path() -> list[str]:
    """Every field's dotted path (for the test that the page covers the whole config)."""
    from toolfactory.config import Config

    return [entry.path for section in sections(Config, Config()) for entry in section.entries]
