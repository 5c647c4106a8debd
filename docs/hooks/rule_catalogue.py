"""The verifier's rule catalogue, generated from the rule registry and the modules around it.

Each rule's code, severity, kind and description come from ``RULES`` (the ``@rule`` decorator and
the rule function's docstring); the judges' questions from ``judges.ASPECTS``; the limits, the
readers' reason codes and the rules each dataset format cannot apply from their modules.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass

from prose import code, first_paragraph

_CONSTANT = re.compile(r'^[A-Z_]+ = "(?P<code>[a-z_]+)"\s+#\s*(?P<doc>.+)$')


@dataclass
class Row:
    code: str
    severity: str
    kind: str
    description: str


def families() -> dict[str, tuple[str, list[Row]]]:
    """family module name -> (its summary, its rules in registry order)."""
    import importlib

    from toolfactory.stages.verify.rules import RULES

    out: dict[str, tuple[str, list[Row]]] = {}
    for rule in RULES.values():
        if rule.family not in out:
            module = importlib.import_module(f"toolfactory.stages.verify.rules.{rule.family}")
            out[rule.family] = (first_paragraph(module.__doc__), [])
        out[rule.family][1].append(Row(rule.code, rule.severity, rule.kind, first_paragraph(inspect.getdoc(rule.fn))))
    return out


def reader_reasons() -> dict[str, str]:
    """The readers' reason codes (``toolfactory.formats.base``), each with its comment."""
    from toolfactory.formats import REASONS
    from toolfactory.formats import base

    found = {}
    for line in inspect.getsource(base).splitlines():
        match = _CONSTANT.match(line.strip())
        if match and match["code"] in REASONS:
            found[match["code"]] = match["doc"]
    return {reason: found.get(reason, "") for reason in sorted(REASONS)}


def page() -> str:
    """The whole Markdown page."""
    import toolfactory.stages.verify.rules.registry as registry
    from toolfactory.formats import NOT_APPLICABLE_REASONS
    from toolfactory.stages.verify import limits
    from toolfactory.stages.verify.judges import ASPECTS

    lines = [
        "# Rule catalogue",
        "",
        "Generated from the verifier's rule registry (`toolfactory/stages/verify/rules/`) each time the "
        "site is built: every rule with its stable code, its severity and its kind. An `error` rejects "
        "the record; a `warning` is kept with it. `validity` rules judge whether a record is correct; "
        "`policy` rules whether a recipe keeps it (`toolfactory verify` runs them with `--policy`); "
        "`execution` rules judge a replay of the calls on their executable sources "
        "([execution verification](../guide/execution-verification.md)). "
        "Any rule can be switched off with `verify.disabled_rules` (or `verify --disable CODE`). "
        "[The verifier](../guide/verifier.md) describes the stage around them.",
        "",
        "A record's verdict lists every failed rule, each with a message and the path of the fault "
        "(`messages[3].tool_calls[0].arguments/days`), not only the first.",
        "",
    ]
    for family, (summary, rows) in families().items():
        lines += [f"## {family.replace('_', ' ').capitalize()}", "", summary, "",
                  "| code | severity | kind | what fails it |", "| --- | --- | --- | --- |"]
        lines += [f"| {code(r.code)} | {r.severity} | {r.kind} | {_cell(r.description)} |" for r in rows]
        lines.append("")
    lines += [
        "## Limits and errors of judging",
        "",
        first_paragraph(limits.__doc__),
        "",
        "| code | what fails it |",
        "| --- | --- |",
        f"| {code(limits.TOO_DEEP)} | {_cell(_field_doc(limits.Limits, 'max_depth'))} Deeper than `verify.max_depth`. |",
        f"| {code(limits.TOO_LARGE)} | {_cell(_field_doc(limits.Limits, 'max_chars'))} More than `verify.max_record_chars`. |",
        f"| {code(registry.CHECK_ERROR)} | Judging the record raised; the message names the rule and the exception's one line. It cannot be disabled. |",
        "",
        "## Model layer",
        "",
        "On the records the rules (and the execution layer) passed, one LLM judge per aspect (`verify.judges`) answers "
        "`verify.judge_votes` times; the majority decides, a tie fails, and a failed aspect rejects "
        "the record with `judge_<aspect>`. Each judge is asked:",
        "",
        "| code | question |",
        "| --- | --- |",
        *[f"| {code('judge_' + aspect)} | {_cell(' '.join(question.split()))} |" for aspect, question in ASPECTS.items()],
        "",
        "## Records a reader cannot take",
        "",
        "`toolfactory verify` counts a record its format's reader cannot convert under one of these "
        "reasons, and goes on with the others:",
        "",
        "| code | meaning |",
        "| --- | --- |",
        *[f"| {code(reason)} | {_cell(doc)} |" for reason, doc in reader_reasons().items()],
        "",
        "## Rules a format cannot apply",
        "",
        "Some formats lack what a rule looks at; `toolfactory verify` skips those rules for them and "
        "lists them in its report:",
        "",
        "| format | rule skipped | why |",
        "| --- | --- | --- |",
    ]
    for fmt, reasons in NOT_APPLICABLE_REASONS.items():
        lines += [f"| `{fmt}` | {code(rule)} | {_cell(why)} |" for rule, why in sorted(reasons.items())]
    return "\n".join(lines) + "\n"


def _field_doc(cls: type, name: str) -> str:
    """A dataclass field's attribute docstring, read from its source."""
    source = inspect.getsource(cls)
    match = re.search(rf"^\s+{name}:[^\n]*\n\s+\"\"\"(.*?)\"\"\"", source, re.M | re.S)
    return " ".join(match.group(1).split()) if match else ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
