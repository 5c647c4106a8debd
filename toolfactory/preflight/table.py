"""The check's table: per role, each capability tried, its result and latency."""

from __future__ import annotations

from typing import Mapping, Sequence

from toolfactory.preflight.probes import Probe


def render_table(endpoint: str, reached: str, probes: Sequence[Probe], choices: Mapping[str, str | None]) -> str:
    lines = [f"preflight of {endpoint}", *([f"  endpoint: {reached}"] if reached else [])]
    groups: dict[tuple[str, str], list[Probe]] = {}
    for probe in probes:
        groups.setdefault((probe.role, probe.model), []).append(probe)
    for (role, model), items in groups.items():
        lines.append(f"  {role} ({model})")
        for probe in items:
            capability = f"{probe.capability}: {probe.mode}" if probe.mode else probe.capability
            # A chat probe's mode is the parameters preflight changed; the one that worked is chosen.
            chosen = probe.ok and bool(probe.mode) and (probe.capability == "chat" or any(
                k.startswith(f"llm.roles.{role}.") and v == probe.mode for k, v in choices.items()) or (
                role == "embedding" and choices.get("llm.embedding_backend") == probe.mode))
            result = probe.status + (" (chosen)" if chosen else "")
            latency = f"as {probe.same_as}" if probe.same_as else "cached" if probe.cached else f"{probe.latency_s * 1000:.0f} ms"
            lines.append(f"    {capability:<44} {result:<20} {latency:>9}  {probe.detail}")
    return "\n".join(lines)
