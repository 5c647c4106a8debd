"""Preflight's choice of the parameters each role sends, where the role leaves them `auto`.

A role's chat probe goes out with its parameters as configured (``max_tokens`` for
``max_tokens_parameter: auto``). When the endpoint refuses one of them by name (OpenAI's error
``param``, else its message) and the role's setting is `auto`, the probe goes out again without
it: ``max_completion_tokens`` in place of a refused ``max_tokens`` (and the other way round), a
refused ``temperature`` or ``top_p`` left out (``sampling_parameters: auto``), so the model samples
at its own default. That is one request per refused parameter. What a model refused is known to
the roles of the same model checked after it, which start without it; a request another role
sent already is not sent again (:meth:`~toolfactory.preflight.probes.Prober.chat`).

A parameter left out is recorded as ``null`` (``llm.roles.<role>.temperature: null``), so the
manifest and the report say that the role samples at the endpoint's default; the features that
sample several answers (judges' votes, self-consistency) still draw them with distinct seeds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolfactory.config import LLMConfig, RoleConfig
from toolfactory.llm.parameters import MAX_TOKENS_FIELDS, SAMPLING, role_parameters
from toolfactory.models import canonical_json
from toolfactory.preflight.probes import Probe, Prober, with_role_mode

Refusal = tuple[str, str, str]  # (model, request field, its value: "" where the name alone is refused)


@dataclass
class Settled:
    """A role's chat probes, the config its parameters worked with, and the settings chosen."""

    llm: LLMConfig
    probes: list[Probe] = field(default_factory=list)
    choices: dict[str, Any] = field(default_factory=dict)

    @property
    def chat(self) -> Probe:
        return self.probes[-1]


async def settle_parameters(prober: Prober, llm: LLMConfig, role: str, refused: set[Refusal], *, choose: bool) -> Settled:
    """Probe `role`'s chat request, changing the `auto` parameters the endpoint refuses (only
    with `choose`: a re-run sends its recorded ones as they are). `refused` is what the models
    refused so far in this check; the refusals found here are added to it."""
    configured = llm.role(role)
    settled, changes = Settled(llm), []
    while choose and (fixed := _avoid_known(configured, settled.llm.role(role), refused)) is not None:
        settled.llm, changes = with_role_mode(settled.llm, role, *fixed), [*changes, _label(*fixed)]
    while True:
        probe = await prober.chat(settled.llm, role, ", ".join(sorted(changes, key=lambda c: c.startswith("no "))))
        settled.probes.append(probe)
        if probe.ok or not choose or not probe.parameter:
            break
        params = settled.llm.role(role)
        refused.add(_refusal(params, probe.parameter))
        fixed = _fixed(configured, params, probe.parameter)
        if fixed is None or (params.model, fixed[1], "") in refused:  # both names refused: not the name
            break
        settled.llm, changes = with_role_mode(settled.llm, role, *fixed), [*changes, _label(*fixed)]
    if choose and settled.chat.ok:
        settled.choices = _choices(role, configured, settled.llm.role(role))
    return settled


def _avoid_known(configured: RoleConfig, params: RoleConfig, refused: set[Refusal]) -> tuple[str, Any] | None:
    """The first change that stops `params` sending what its model refused already, if any."""
    for name in role_parameters(params):
        if _refusal(params, name) in refused and (fixed := _fixed(configured, params, name)) is not None:
            if fixed[0] != "max_tokens_parameter" or (params.model, fixed[1], "") not in refused:
                return fixed
    return None


def _refusal(params: RoleConfig, name: str) -> Refusal:
    # A server that refuses `max_tokens` refuses it whatever the limit; a sampling parameter may
    # be refused for its value only (a temperature above the model's range).
    value = "" if name in MAX_TOKENS_FIELDS else canonical_json(role_parameters(params).get(name))
    return (params.model, name, value)


def _fixed(configured: RoleConfig, params: RoleConfig, name: str) -> tuple[str, Any] | None:
    """(setting, value) that stops `params` sending the refused `name`, where `configured` leaves it `auto`."""
    if name == params.max_tokens_field and configured.max_tokens_parameter == "auto":
        return "max_tokens_parameter", next(f for f in MAX_TOKENS_FIELDS if f != name)
    if name in SAMPLING and configured.sampling_parameters == "auto" and getattr(params, name) is not None:
        return name, None
    return None


def _label(setting: str, value: Any) -> str:
    return str(value) if setting == "max_tokens_parameter" else f"no {setting}"


def _choices(role: str, configured: RoleConfig, params: RoleConfig) -> dict[str, Any]:
    chosen: dict[str, Any] = {}
    if configured.max_tokens_parameter == "auto":
        chosen[f"llm.roles.{role}.max_tokens_parameter"] = params.max_tokens_field
    for name in SAMPLING:
        if getattr(configured, name) is not None and getattr(params, name) is None:
            chosen[f"llm.roles.{role}.{name}"] = None  # left out: the endpoint's default applies
    return chosen
