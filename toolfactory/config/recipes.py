"""The recipes a config may name: their names, and the type that checks one.

A recipe (toolalpaca, toolllm, toolace) is one module of :mod:`toolfactory.recipes`, named after
it; its parts reach into the stages, which sit above the config, so the config knows recipes by
name only. :data:`BUILTIN` is the registry of those names: a new recipe is its module and its
name here. A recipe defined elsewhere (a plugin, a test) is declared when it is registered
(:func:`toolfactory.recipes.register`), and from then on the config accepts its name too.

Kept apart from :mod:`toolfactory.recipes` so that the config can check the names without
importing the stages (as :mod:`.allowlist` is kept apart from the HTTP executor).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator

BUILTIN: tuple[str, ...] = (
    "toolalpaca",  # ToolAlpaca: one tool, user agent, multi-agent simulation
    "toolllm",  # ToolLLM: I1/I2/I3 tool sets, seed examples, DFSDT search
    "toolace",  # ToolACE: same-domain APIs, target modes, formal thinking, self-consistency
)
_declared: dict[str, None] = {}  # recipes registered at run time, in order


def recipe_names() -> tuple[str, ...]:
    """Every recipe a config may name: the built-in ones, then those declared since."""
    return (*BUILTIN, *(name for name in _declared if name not in BUILTIN))


def declare(name: str) -> None:
    """Let the config name the recipe `name` (its implementation is registered above)."""
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"a recipe's name is letters, digits, '_' and '-', got {name!r}")
    _declared[name] = None


def withdraw(name: str) -> None:
    """Undo :func:`declare` (a built-in recipe stays)."""
    _declared.pop(name, None)


def known_recipe(name: str) -> str:
    """`name` when it is a recipe's; otherwise the error pydantic reports at the field's path."""
    names = recipe_names()
    if name not in names:
        raise ValueError(f"unknown recipe {name!r} (recipes: {', '.join(repr(n) for n in names)})")
    return name


@dataclass(frozen=True)
class Choices:
    """Field metadata naming the values a string may take, read when asked (the documentation
    lists them; the validator beside it checks them)."""

    values: Callable[[], tuple[str, ...]]


RecipeName = Annotated[str, AfterValidator(known_recipe), Choices(recipe_names)]
"""A recipe's name in a config field: checked against :func:`recipe_names` when the config loads."""
