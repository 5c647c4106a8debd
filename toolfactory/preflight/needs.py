"""What a run will ask of its endpoint: which roles it calls, and with which kinds of request.

Derived from the config alone, so that preflight sends only the requests the run will send: a
role no stage calls (the designer when nothing is documented or synthesized, the judge with the
model layer off) is not checked, and neither is a capability no stage uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolfactory.config import ROLES, Config
from toolfactory.recipes import recipe_named
from toolfactory.recipes.base import Needs as RecipeNeeds


@dataclass(frozen=True)
class Needs:
    roles: tuple[str, ...]
    """Roles whose model the run calls (each gets a plain chat request)."""
    structured: tuple[str, ...]
    """Roles asked for JSON answers that fit a schema."""
    tool_calling: tuple[str, ...]
    """Roles offered functions to call."""
    embeddings: bool
    """Whether the run embeds texts (the curate stage scores complexity and diversity with them)."""


def run_needs(config: Config) -> Needs:
    tools = config.tools
    # What the recipes the run draws ask (toolllm: the designer, for its API probes and the keys
    # long responses keep; toolace: the target model of self-guided complexity, the assistant's
    # formal thinking as JSON).
    recipes = RecipeNeeds()
    for name, share in config.tasks.recipes.items():
        if share > 0:
            recipes |= recipe_named(name).needs(config)
    designer = (tools.synthesis.count > 0 or tools.builtin_introductions
                or any(f.format == "introductions" for f in tools.files) or "designer" in recipes.roles)
    used = {
        "designer": designer,
        "user": True,  # instructions (tasks) and the user agent (dialogues)
        "assistant": True,
        "tool": True,  # the tool executor (also for tools outside `dialogues.http.allowlist`)
        "judge": bool(config.verify.judges),
        "target": "target" in recipes.roles,  # the model the data is for, probed by self-guided complexity
    }
    roles = tuple(role for role in ROLES if used[role])
    structured = tuple(role for role in roles if role not in ("assistant", "target") or role in recipes.structured)
    calling = tuple(role for role in ("assistant", "target") if used[role])
    return Needs(roles=roles, structured=structured, tool_calling=calling, embeddings=True)
