"""Verify an existing dataset file with the rule layer and write a report.

:func:`verify_file` reads `path` with a reader of :mod:`toolfactory.formats`, runs every rule
(:func:`~toolfactory.stages.verify.rules.check`) except the format's ``NOT_APPLICABLE`` codes and
the `disabled` ones, and writes to `out_dir`:

* ``report.json``::

      {"path", "format",
       "records",         # input records: parsed + format errors
       "parsed",          # records read into Dialogues: accepted + rejected
       "format_errors": {reason: n},
       "accepted", "rejected",
       "pass_rate",       # accepted / parsed (0.0 when nothing parsed), 4 decimals
       "rules": {code: n},     # records rejected with this error code (a record counts once per code)
       "warnings": {code: n},  # parsed records with this warning (accepted or not)
       "skipped_rules": [code, ...],  # not applicable to the format, plus disabled; sorted
       "policy": name, "per record" or null,  # the recipe policy applied (policy rules); null: validity only
       "policy_source": text or null,         # where the policy came from ("--policy", an export's PROVENANCE.md, ...)
       "policies": {name: n},                 # parsed records judged with each recipe's policy
       "execution": {"mode": "record" | "live",   # how records whose calls ran on executable sources were checked
                     "sources": {source: {"live": n, "from_record": n, "drifted": n}},
                     "unavailable": {source: message}}}  # sources that could not start (record mode: not tried)

  ``rules`` and ``warnings`` are ordered by count, then code.
* ``rejected.jsonl``: one line per rejected record, in input order:
  ``{"index", "id", "codes": [error codes], "errors": [{code, path, message}],
  "warnings": [{code, path, message}]}``.
* ``format_errors.jsonl``: one line per record that could not be read:
  ``{"index", "reason", "message", "where"}``.
* ``report.md``: a short summary for a human: counts, pass rate, the format errors and the rules
  that reject most, each with one example, the warnings and the skipped rules with why.

By default only **validity** rules run (is each record correct?); the ``filter_*`` **policy**
rules (does a recipe keep it?) run with `policy` (:mod:`toolfactory.stages.verify.policy`): one
recipe's for every record, or an export's (:class:`~toolfactory.stages.verify.export_policy.ExportPolicy`:
each record's recipe's, as the factory's verify stage applied it, with the run's disabled rules
and, unless `limits` is given, its limits; ``policy`` is then ``"per record"``).

**Execution.** A record whose calls ran on executable sources (``generation.execution``) is, by
default, checked from the record (:mod:`toolfactory.stages.verify.from_record`: nothing runs, so
a dataset can be checked when its servers are gone); with `live` its calls are replayed for real
on the sources the record names itself (BFCL's environments) or the run's configuration names
(`tools`), and a source that cannot start raises
:class:`~toolfactory.stages.verify.execution.SourceUnavailable`. ``execution.sources`` counts per
source the records replayed live or checked from the record, and those a live replay found
drifted (``exec_source_drifted``).

An input with no record, or none that the reader could turn into a dialogue (a file of another
format, or of a shape the reader does not know), or a file the reader cannot read at all (a JSON
document that does not parse), raises :class:`~toolfactory.formats.UnreadableFile`
after the report is written: the CLI exits 2 for it in every format, never 0 with nothing checked.

Everything is a function of the input (no timestamps), so two runs give identical files; ids of
records without one are content hashes (see :mod:`toolfactory.formats.base`). ``report.json`` is
written last.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Literal

import asyncio

from toolfactory.errors import ConfigError
from toolfactory.formats import FORMATS, NOT_APPLICABLE, NOT_APPLICABLE_REASONS, READERS, FormatError, UnreadableFile, toolbench
from toolfactory.models import Dialogue, Verdict
from toolfactory.stages.verify.execution import ExecutionLayer, ExecutionTally, applies
from toolfactory.stages.verify.export_policy import ExportPolicy
from toolfactory.stages.verify.limits import DEFAULT as DEFAULT_LIMITS
from toolfactory.stages.verify.limits import Limits
from toolfactory.stages.verify.policy import POLICIES, Policy
from toolfactory.stages.verify.parallel import Found, Outcome, Policies, outcomes, parallel_outcomes, splittable
from toolfactory.stages.verify.rules import RULES

if TYPE_CHECKING:
    from toolfactory.config import ToolsConfig

TOP_RULES = 10  # rules listed in report.md
ExecutionMode = Literal["record", "live"]


class ExecutionCheck:
    """The execution layer of one verify run, record by record (see the module doc): a layer per
    record, each replay in its own event loop, sharing one tally."""

    def __init__(self, mode: ExecutionMode, skipped: frozenset[str], tools: ToolsConfig | None = None) -> None:
        self.mode, self.skipped, self.tools = mode, skipped, tools
        self.tally = ExecutionTally()

    def _configured(self) -> dict[str, Any]:
        if self.tools is None:
            return {}
        from toolfactory.executable.registry import environments, source_settings

        built = environments(self.tools)
        # One process per session: a warm pool would outlive the record's event loop.
        return {name: (built[name], s.model_copy(update={"warm_sessions": False}))
                for name, s in source_settings(self.tools).items() if name in built}

    def __call__(self, dialogue: Dialogue, policy: Policy | None) -> list[Verdict]:
        if not applies(dialogue):
            return []
        # From the record, the configured sources give their settings (conventions), never a session.
        layer = ExecutionLayer(self._configured(), self.skipped, self.mode,
                               "raise" if self.mode == "live" else "record", self.tally)
        return asyncio.run(layer.verdicts(dialogue, policy))

    def summary(self) -> dict[str, Any]:
        unavailable = self.tally.unavailable if self.mode == "live" else {}
        return {"mode": self.mode, "sources": self.tally.by_source(), "unavailable": dict(sorted(unavailable.items()))}



def _until_unreadable(results: Iterable[Outcome], unreadable: list[UnreadableFile]) -> Iterator[Outcome]:
    """`results` until the reader finds the file itself unreadable (kept in `unreadable`): the
    report files are written all the same."""
    try:
        yield from results
    except UnreadableFile as exc:
        unreadable.append(exc)


def _verdict(v: Found) -> dict[str, str]:
    return {"code": v.code, "path": v.path, "message": v.message}


def _ordered(counts: Counter[str]) -> dict[str, int]:
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _skipped(fmt: str, disabled: Iterable[str]) -> tuple[frozenset[str], frozenset[str]]:
    if fmt not in READERS:
        raise ConfigError(f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    disabled = frozenset(disabled)
    unknown = sorted(disabled - set(RULES))
    if unknown:
        raise ConfigError(f"unknown rule codes {unknown} (allowed: {', '.join(sorted(RULES))})")
    return disabled, NOT_APPLICABLE[fmt] | disabled


VALIDITY_ONLY = "none"  # --policy none: validity only, whatever an export says


def policy_named(name: str | None) -> Policy | None:
    """The policy of recipe `name` (None or ``none``: validity only); a ConfigError names the known ones."""
    if name is None or name == VALIDITY_ONLY:
        return None
    if name not in POLICIES:
        raise ConfigError(f"--policy: unknown recipe {name!r} (policies: {', '.join(POLICIES)}, or {VALIDITY_ONLY})")
    return POLICIES[name]


def verify_file(path: str | Path, fmt: str, out_dir: str | Path, disabled: Iterable[str] = frozenset(),
                policy: Policies = None, limits: Limits | None = None, paths: str | None = None,
                workers: int = 1, policy_source: str | None = None, execution: ExecutionMode = "record",
                tools: ToolsConfig | None = None) -> dict[str, Any]:
    """Read `path` as `fmt`, check every record, write the report files to `out_dir`; the report dict.
    `paths` (``released`` or ``all``) chooses which paths of ToolBench answer files are records;
    with `workers` > 1 a JSONL file of a line format is checked on that many processes;
    `policy_source` says where `policy` came from (the report states it); `execution` checks
    executed records from the record or ``live`` on their sources (`tools`: the run's)."""
    if execution not in ("record", "live"):
        raise ConfigError(f"execution: {execution!r} is not one of record, live")
    disabled, skipped = _skipped(fmt, disabled)
    if paths is not None and fmt != "toolbench":
        raise ConfigError(f"--paths applies to --format toolbench only, not {fmt}")
    read = READERS[fmt] if paths is None else partial(toolbench.read, paths=paths)
    exported: frozenset[str] = frozenset()  # rules the run that made an export had disabled
    if isinstance(policy, ExportPolicy):
        exported = frozenset(code for code in policy.disabled_rules if code in RULES) - skipped
        skipped |= exported
        limits = limits or policy.limits
    limits = limits or DEFAULT_LIMITS
    if policy is None:
        skipped |= {code for code, registered in RULES.items() if registered.kind == "policy"}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    records = parsed = accepted = rejected = 0
    format_errors: Counter[str] = Counter()
    applied: Counter[str] = Counter()  # parsed records by the policy that judged them
    failed: Counter[str] = Counter()
    warned: Counter[str] = Counter()
    format_examples: dict[str, FormatError] = {}
    rule_examples: dict[str, tuple[str, Found]] = {}
    warning_examples: dict[str, tuple[str, Found]] = {}
    # backslashreplace: a lone surrogate a record holds (JSON's "\ud800") is written as its escape,
    # which is what it was in the input, instead of failing the report.
    with (out / "rejected.jsonl").open("w", encoding="utf-8", errors="backslashreplace") as rejected_file, \
            (out / "format_errors.jsonl").open("w", encoding="utf-8", errors="backslashreplace") as errors_file:
        source = Path(path)
        executing = ExecutionCheck(execution, frozenset(skipped), tools)
        # A line format's records never hold executed calls (their readers give no `generation`).
        if workers > 1 and splittable(source, fmt):
            results = parallel_outcomes(source, fmt, workers, frozenset(skipped), limits, policy)
        else:
            results = outcomes(read(source), frozenset(skipped), limits, policy, executing)
        unreadable: list[UnreadableFile] = []
        for index, outcome in enumerate(_until_unreadable(results, unreadable)):
            records += 1
            if isinstance(outcome, FormatError):
                format_errors[outcome.reason] += 1
                format_examples.setdefault(outcome.reason, outcome)
                errors_file.write(json.dumps(outcome.to_dict(), ensure_ascii=False) + "\n")
                continue
            parsed += 1
            record_id, rejecting, warnings, policy_name = outcome
            if policy_name is not None:
                applied[policy_name] += 1
            for v in warnings:
                warning_examples.setdefault(v.code, (record_id, v))
            warned.update({v.code for v in warnings})
            if not rejecting:
                accepted += 1
                continue
            rejected += 1
            codes = sorted({v.code for v in rejecting})
            failed.update(codes)
            for v in rejecting:
                rule_examples.setdefault(v.code, (record_id, v))
            line = {"index": index, "id": record_id, "codes": codes, "errors": [_verdict(v) for v in rejecting],
                    "warnings": [_verdict(v) for v in warnings]}
            rejected_file.write(json.dumps(line, ensure_ascii=False) + "\n")
    report: dict[str, Any] = {
        "path": str(path),
        "format": fmt,
        "records": records,
        "parsed": parsed,
        "format_errors": _ordered(format_errors),
        "accepted": accepted,
        "rejected": rejected,
        "pass_rate": round(accepted / parsed, 4) if parsed else 0.0,
        "rules": _ordered(failed),
        "warnings": _ordered(warned),
        "skipped_rules": sorted(skipped),
        "policy": "per record" if isinstance(policy, ExportPolicy) else policy.name if policy is not None else None,
        "policy_source": policy.source if isinstance(policy, ExportPolicy) else policy_source or (None if policy is None else "requested"),
        "policies": _ordered(applied),
        "execution": executing.summary(),
    }
    reasons = {code: NOT_APPLICABLE_REASONS[fmt].get(code, "disabled") for code in skipped}
    for code in exported:
        reasons[code] = "disabled by the run that made the export (verify.disabled_rules in its PROVENANCE.md)"
    for code in skipped - disabled - exported - NOT_APPLICABLE[fmt]:
        reasons[code] = "a policy rule (does a recipe keep the record?): run with --policy RECIPE"
    for code in disabled & NOT_APPLICABLE[fmt]:
        reasons[code] += " (also disabled)"
    (out / "report.md").write_text(markdown(report, format_examples, rule_examples, warning_examples, reasons),
                                   encoding="utf-8", errors="backslashreplace")
    (out / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8",
                                     errors="backslashreplace")
    if unreadable:  # the report says what was read before (nothing, for a whole document)
        raise unreadable[0]
    if not records:
        raise UnreadableFile(f"{path}: no records")
    if not parsed:
        first = next(iter(format_examples.values()))
        raise UnreadableFile(f"{path}: none of its {records} records is a {fmt} record (first: {first.where}: "
                             f"{first.reason}: {first.message}); is it another format? (formats: {', '.join(FORMATS)})")
    return report


def policy_line(report: dict[str, Any]) -> str:
    """Which policy judged the records and where it came from, in a line."""
    source = f" ({report['policy_source']})" if report.get("policy_source") else ""
    if report["policy"] is None:
        return f"none, validity only{source}"
    counts = ", ".join(f"{name} {n}" for name, n in report["policies"].items())
    if report["policy"] == "per record":
        return f"each record's recipe's, as the factory verified the export{source}: {counts or 'no record'}"
    return f"{report['policy']}{source}"


def _cell(text: str, limit: int = 160) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def markdown(
    report: dict[str, Any],
    format_examples: dict[str, FormatError],
    rule_examples: dict[str, tuple[str, Found]],
    warning_examples: dict[str, tuple[str, Found]],
    skip_reasons: dict[str, str],
) -> str:
    """The human-readable summary of a report (see the module doc)."""
    lines = [
        f"# Verify report: {Path(report['path']).name}",
        "",
        f"- input: `{report['path']}` (format `{report['format']}`)",
        f"- records: {report['records']} ({report['parsed']} parsed, {sum(report['format_errors'].values())} format errors)",
        f"- accepted: {report['accepted']}, rejected: {report['rejected']}",
        f"- pass rate: {report['pass_rate']:.1%} of parsed records",
        f"- policy: {policy_line(report)}",
        "",
    ]
    if report["format_errors"]:
        lines += ["## Format errors (records that could not be read)", "", "| reason | records | example |", "| --- | ---: | --- |"]
        for reason, n in report["format_errors"].items():
            example = format_examples[reason]
            lines.append(f"| `{reason}` | {n} | {_cell(f'{example.where}: {example.message}')} |")
        lines.append("")

    def rule_table(title: str, counts: dict[str, int], examples: dict[str, tuple[str, Found]]) -> None:
        nonlocal lines
        if not counts:
            return
        shown = list(counts.items())[:TOP_RULES]
        lines += [title, "", "| rule | records | example |", "| --- | ---: | --- |"]
        for code, n in shown:
            record_id, v = examples[code]
            lines.append(f"| `{code}` | {n} | {_cell(f'`{record_id}` {v.path}: {v.message}')} |")
        if len(counts) > len(shown):
            lines.append(f"| ... | | {len(counts) - len(shown)} more rules in report.json |")
        lines.append("")

    rule_table("## Rules that reject records", report["rules"], rule_examples)
    rule_table("## Warnings (recorded, not rejecting)", report["warnings"], warning_examples)
    if not report["rules"] and report["parsed"]:
        lines += ["Every parsed record passes every applied rule.", ""]
    lines += execution_lines(report.get("execution") or {})
    if report["skipped_rules"]:
        lines += ["## Skipped rules", ""]
        lines += [f"- `{code}`: {skip_reasons.get(code, 'disabled')}" for code in report["skipped_rules"]]
        lines.append("")
    return "\n".join(lines)


def execution_lines(execution: dict[str, Any]) -> list[str]:
    """report.md's section on the records whose calls ran on executable sources (none: no lines)."""
    sources = execution.get("sources") or {}
    if not sources:
        return []
    how = ("replayed on their sources (--live)" if execution.get("mode") == "live"
           else "checked from the record, nothing run (--live replays them)")
    lines = ["## Executed calls", "", f"Records whose calls ran on executable sources were {how}.", "",
             "| source | replayed live | checked from the record | drifted |", "| --- | ---: | ---: | ---: |"]
    lines += [f"| `{name}` | {n['live']} | {n['from_record']} | {n['drifted']} |" for name, n in sources.items()]
    lines.append("")
    for name, message in (execution.get("unavailable") or {}).items():
        lines.append(f"- `{name}` could not start: {_cell(message)}")
    return lines + ([""] if execution.get("unavailable") else [])


__all__ = ["ExecutionCheck", "VALIDITY_ONLY", "execution_lines", "markdown", "policy_line", "policy_named", "verify_file"]
