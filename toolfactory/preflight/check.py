"""The check itself: every capability the run needs, per role, and the modes chosen for `auto`.

First the endpoint must answer now: its model list is asked for, never from the cache, and an
endpoint that does not answer ends the check there, with one message naming `llm.base_url`
(cached answers would otherwise pass a check of an endpoint that is down). A model it does not
list gets its first request sent to it, not taken from the cache (:mod:`.probes`).

For each role the run calls: a plain chat request, sent again without each parameter the
endpoint refuses where the role leaves it `auto` (:mod:`.parameters`); then, for a role asked for
JSON, a structured answer in its structured-output mode; for a role that calls functions, a tool
call in its tool-calling mode; and embeddings when the run embeds. Roles of one model are checked
one after the other, so each starts from what the model refused before; models are checked side
by side. Where a mode is `auto`, the modes are tried in order (``native``, ``text``;
``json_schema``, ``json_object``, ``prompt``) and the first that works is chosen. Where a mode is set and fails, the others are tried too, so that the
message can name the setting that would work. The first need that nothing serves is the one
message of :class:`PreflightFailed`, which names the config field to change.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from typing import Any

import openai

from toolfactory.config import Config, LLMConfig
from toolfactory.llm import Endpoint, RequestCache
from toolfactory.llm.gateway import connection_failure
from toolfactory.llm.identity import IDENTIFY_RETRIES, IDENTIFY_TIMEOUT_S, EndpointIdentity, list_models, served_by_of
from toolfactory.llm.parameters import MAX_TOKENS_FIELDS, SAMPLING
from toolfactory.preflight.choices import STRUCTURED_OUTPUT, TOOL_CALLING, describe_choice
from toolfactory.preflight.needs import Needs, run_needs
from toolfactory.preflight.parameters import Refusal, Settled, settle_parameters
from toolfactory.preflight.probes import Probe, Prober
from toolfactory.preflight.table import render_table
from toolfactory.storage import ObjectStore


@dataclass
class Preflight:
    """What a check found: every probe, the settings chosen for `auto` (a parameter left out is
    ``None``), and the problems, the first of which a run reports."""

    endpoint: str
    probes: list[Probe] = field(default_factory=list)
    choices: dict[str, str | None] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    identity: EndpointIdentity | None = None  # what the endpoint says it is (toolfactory/llm/identity.py)
    reached: str = ""  # how the endpoint answered its model list, just now

    @property
    def ok(self) -> bool:
        return not self.problems

    def table(self) -> str:
        table = render_table(self.endpoint, self.reached, self.probes, self.choices)
        return table + (f"\n  made by: {self.identity.label}" if self.identity is not None else "")

    def choice_lines(self) -> list[str]:
        """One line per setting chosen: ``field: value``."""
        return [f"{field}: {describe_choice(value)}" for field, value in self.choices.items()]

    def record(self) -> dict[str, Any]:
        """What the run's manifest keeps."""
        return {"endpoint": self.endpoint, "choices": dict(self.choices), "probes": [p.to_dict() for p in self.probes],
                **({"identity": self.identity.to_dict()} if self.identity is not None else {})}


async def check_endpoint(config: Config, endpoint: Endpoint, *, choose: bool = True) -> Preflight:
    """Probe `endpoint` for everything `config`'s run needs. With `choose` false (a re-run, which
    must keep the modes its run was made with), `auto` is not chosen anew but checked as it
    resolves without preflight."""
    report = Preflight(endpoint.base_url)
    started = time.perf_counter()
    identity, failure = await list_models(endpoint)
    report.reached = _reached(identity, failure, time.perf_counter() - started)
    if isinstance(failure, openai.APIConnectionError):
        report.problems.append(_unreachable(identity, failure))
        return report
    store = ObjectStore.open(config.storage) if config.llm.cache else None
    prober = Prober(endpoint, lambda: RequestCache(store) if store is not None else None, listed=identity.models)
    needs = run_needs(config)
    by_model: dict[str, list[str]] = {}
    for role in needs.roles:
        by_model.setdefault(config.llm.role(role).model, []).append(role)
    checked: dict[str, tuple[list[Probe], dict[str, str | None], str | None]] = {}
    groups = await asyncio.gather(*(_check_model(config, prober, roles, needs, choose) for roles in by_model.values()))
    for group in groups:
        checked.update(group)
    for role in needs.roles:
        probes, choices, problem = checked[role]
        report.probes += probes
        report.choices.update(choices)
        report.problems += [problem] if problem else []
    if needs.embeddings:
        probe = await prober.embeddings(config.llm)
        report.probes.append(probe)
        if config.llm.embedding_backend == "auto" and choose:
            report.choices["llm.embedding_backend"] = probe.mode
        if not probe.ok:
            report.problems.append(_embedding_problem(config, probe))
    report.identity = identity.with_answers(served_by_of(prober.meter.to_dict()))
    return report


async def _check_model(config: Config, prober: Prober, roles: list[str], needs: Needs,
                       choose: bool) -> dict[str, tuple[list[Probe], dict[str, str | None], str | None]]:
    """Check the roles of one model: their chat requests one after the other (each starts from
    what the model refused before), the rest of each role's checks as soon as its chat works."""
    refused: set[Refusal] = set()
    checks = {}
    for role in roles:
        settled = await settle_parameters(prober, config.llm, role, refused, choose=choose)
        checks[role] = asyncio.ensure_future(_check_role(config, prober, role, needs, choose, settled))
    return {role: await check for role, check in checks.items()}


async def _check_role(config: Config, prober: Prober, role: str, needs: Needs, choose: bool,
                      settled: Settled) -> tuple[list[Probe], dict[str, str | None], str | None]:
    llm = settled.llm  # the role's parameters as they worked
    probes, choices = list(settled.probes), dict(settled.choices)
    if not settled.chat.ok:
        return probes, choices, _chat_problem(config, role, settled.chat)
    problem = None
    for setting, candidates, needed in (("tool_calling", TOOL_CALLING, role in needs.tool_calling),
                                        ("structured_output", STRUCTURED_OUTPUT, role in needs.structured)):
        if not needed:
            continue
        configured = getattr(llm.role(role), setting) or getattr(llm, setting)
        auto = configured == "auto" and choose
        first = configured if configured != "auto" else candidates[0]
        tried = await _try_modes(prober, llm, role, setting, [first, *(m for m in candidates if m != first)], stop_at_ok=True)
        probes += tried
        working = next((p.mode for p in tried if p.ok), None)
        if auto and working is not None:
            choices[f"llm.roles.{role}.{setting}"] = working
        # Otherwise the mode is fixed (set, or kept by a re-run) and must be the one that works.
        if (working is None or (not auto and working != first)) and problem is None:
            problem = _mode_problem(config, role, setting, configured, tried, working)
    return probes, choices, problem


async def _try_modes(prober: Prober, llm: LLMConfig, role: str, setting: str, modes: list[str], *, stop_at_ok: bool) -> list[Probe]:
    tried = []
    for mode in modes:
        probe = await (prober.tool_call(llm, role, mode) if setting == "tool_calling" else prober.structured(llm, role, mode))
        tried.append(probe)
        if probe.ok and stop_at_ok:
            break
    return tried


def _reached(identity: EndpointIdentity, failure: openai.OpenAIError | None, elapsed_s: float) -> str:
    if failure is None:
        listed = len(identity.models)
        return f"GET /models answered in {elapsed_s * 1000:.0f} ms ({listed} model{'' if listed == 1 else 's'} listed)"
    if isinstance(failure, openai.APIConnectionError):
        return "GET /models: no answer ({}: {})".format(*connection_failure(failure))
    return f"GET /models answered {identity.unlisted} (each model's first request is sent to it, not taken from the cache)"


# --- the one message, naming the field to change ------------------------------------------------


def _unreachable(identity: EndpointIdentity, failure: openai.APIConnectionError) -> str:
    reason, what = connection_failure(failure)
    if reason == "llm_timeout":
        return (f"llm.base_url: the endpoint at {identity.base_url} did not answer GET /models in "
                f"{IDENTIFY_RETRIES + 1} tries of {IDENTIFY_TIMEOUT_S:g} s ({reason}: {what})")
    return (f"llm.base_url: cannot connect to the endpoint at {identity.base_url}: nothing answers there "
            f"(GET /models: {reason}: {what})")


def _field(config: Config, role: str, setting: str) -> str:
    """The field that holds `role`'s `setting`: its own override if it has one, else the default."""
    return f"llm.roles.{role}.{setting}" if getattr(config.llm.role(role), setting) else f"llm.{setting}"


def _mode_problem(config: Config, role: str, setting: str, configured: str, tried: list[Probe], working: str | None) -> str:
    what = "tool calling" if setting == "tool_calling" else "structured output"
    failed = next(p for p in tried if not p.ok)
    target = _field(config, role, setting)
    if working is not None:
        return (f"llm.roles.{role}: the endpoint does not support {what} as {failed.mode} for model "
                f"{failed.model!r} ({failed.detail}); set {target}: {working}")
    tried_text = "; ".join(f"{p.mode}: {p.detail}" for p in tried)
    return (f"llm.roles.{role}.model: model {failed.model!r} at this endpoint serves {what} in no mode "
            f"toolfactory knows ({tried_text}); choose another model for this role")


_STATUS = re.compile(r"refused the request \((\d{3})\)")


def _chat_problem(config: Config, role: str, probe: Probe) -> str:
    params = config.llm.role(role)  # as configured: the message names what to set there
    detail = probe.detail
    said = f"the endpoint refused a chat request to model {probe.model!r} ({detail})"
    if probe.status == "unreachable" and "llm_connection_error" in detail:
        return f"llm.base_url: cannot connect to the endpoint for llm.roles.{role}: nothing answers there ({detail})"
    if probe.status == "unreachable":
        return f"llm.base_url: the endpoint did not answer a chat request for llm.roles.{role} ({detail})"
    status = _STATUS.search(detail)
    if status and status.group(1) in ("401", "403"):
        key = f"llm.api_key_secret_block {config.llm.api_key_secret_block!r}" if config.llm.api_key_secret_block \
            else f"llm.api_key_env (the variable {config.llm.api_key_env})"
        return f"{key}: {said}; check the API key"
    refused = probe.parameter
    if refused in MAX_TOKENS_FIELDS:
        if params.max_tokens_parameter == "auto":  # both names were tried: the limit itself is refused
            return f"llm.roles.{role}.max_tokens: {said}; set a limit the model allows"
        other = next(f for f in MAX_TOKENS_FIELDS if f != refused)
        return f"llm.roles.{role}.max_tokens_parameter: {said}; set llm.roles.{role}.max_tokens_parameter: {other}"
    if refused in SAMPLING and getattr(params, refused) is not None:
        return f"llm.roles.{role}.{refused}: {said}; set llm.roles.{role}.{refused}: null"
    return f"llm.roles.{role}.model: {said}; check the model name and llm.base_url"


def _embedding_problem(config: Config, probe: Probe) -> str:
    if probe.mode == "local":
        return f"llm.embedding_backend: the local embedding model {probe.model!r} does not work here ({probe.detail})"
    return (f"llm.embedding_model: the endpoint refused embeddings with model {probe.model!r} ({probe.detail}); "
            "set llm.embedding_model to an embedding model the endpoint serves, or llm.embedding_backend: local "
            "(pip install \"toolfactory[local-embeddings]\")")
