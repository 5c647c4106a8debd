"""The recipes of the factory, by name (docs/architecture.md §2).

==========  ===========================================================================================
recipe      module
==========  ===========================================================================================
toolalpaca  :mod:`.toolalpaca`: one tool, user agent, multi-agent simulation with a ReAct assistant
toolllm     :mod:`.toolllm`: I1/I2/I3 tool sets, probed APIs, seed examples, DFSDT solution search
toolace     :mod:`.toolace`: same-domain APIs, target modes, formal thinking, self-consistency
==========  ===========================================================================================

A recipe is one module of this package, named after it, holding one :class:`~.base.Recipe`
(``RECIPE``); its name is listed in :data:`toolfactory.config.recipes.BUILTIN`, the registry the
config checks `tasks.recipes` (and the other fields that name recipes) against. A module is
imported the first time its recipe is asked for, as the stages are (:mod:`toolfactory.stages`):
its parts reach into the stages, which loading a config, or `toolfactory verify`, never needs.

A recipe defined outside this package is registered (:func:`register`): from then on the config
accepts its name and every stage uses it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from toolfactory.config.recipes import BUILTIN, declare, recipe_names, withdraw
from toolfactory.errors import TerminalError

if TYPE_CHECKING:
    from toolfactory.recipes.base import Recipe

_loaded: dict[str, Recipe] = {}  # each recipe once asked for (built-in) or registered


def recipe_named(name: str) -> Recipe:
    """The recipe called `name`, importing only its own module."""
    recipe = _loaded.get(name)
    if recipe is None:
        if name not in BUILTIN:
            raise TerminalError(f"unknown recipe {name!r} (recipes: {', '.join(recipe_names())})")
        recipe = import_module(f"{__name__}.{name}").RECIPE
        if recipe.name != name:
            raise TerminalError(f"the module of recipe {name!r} holds recipe {recipe.name!r}")
        _loaded[name] = recipe
    return recipe


def all_recipes() -> dict[str, Recipe]:
    """Every recipe by name, the built-in ones first (each module imported)."""
    return {name: recipe_named(name) for name in recipe_names()}


def register(recipe: Recipe) -> Recipe:
    """Add a recipe defined outside this package: the config accepts its name from now on."""
    if recipe.name in recipe_names():
        raise ValueError(f"a recipe named {recipe.name!r} exists already")
    declare(recipe.name)
    _loaded[recipe.name] = recipe
    return recipe


def unregister(name: str) -> None:
    """Undo :func:`register` (a built-in recipe cannot be removed)."""
    if name in BUILTIN:
        raise ValueError(f"{name!r} is a built-in recipe")
    _loaded.pop(name, None)
    withdraw(name)


__all__ = ["all_recipes", "recipe_named", "register", "unregister"]
