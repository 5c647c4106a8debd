"""How the factory verified an export's records, as its ``PROVENANCE.md`` carries it, so that
``toolfactory verify`` judges them again as the factory's verify stage did.

The verify stage applies to each dialogue the policy of its recipe (:func:`~toolfactory.stages.verify.policy.for_recipe`
with the run's ``verify.max_steps`` and ``verify.keep_error_recovery``: ToolAlpaca's five-step cap,
its error recovery, its ``getDetails``), skips the run's ``verify.disabled_rules`` and rejects a
record over ``verify.max_depth`` / ``verify.max_record_chars``. The exported records keep no
recipe (OpenAI's validator refuses a key it does not know; the other formats are written as their
consumers read them), so the front matter of the export's ``PROVENANCE.md`` holds them::

    verify:
      read_as: toolbench                  # the --format that reads the records back (null: no reader)
      settings: the run's configuration   # or: defaults (the run has no manifest)
      disabled_rules: []
      max_depth: 64
      max_record_chars: 2000000
      policies:                           # how each group of records is judged: its recipe's policy
        toolllm: {recipe: toolllm, max_steps: null, keep_error_recovery: false, builtin_functions: []}
        toolalpaca, Finish added:         # ... with what the format changed in its records
          {recipe: toolalpaca, max_steps: 6, keep_error_recovery: true, builtin_functions: [getDetails],
           change: Finish added}
      policy: toolalpaca, Finish added    # the policy of every record not listed under `records`
      records:                            # by policy, the ids `verify --format <read_as>` gives the others
        toolllm: [3f2a9c0d1e4b5a67, 0b9e1c2d3f4a5b6c]

``policy`` is the export's most common one, so an export of one recipe lists no id. A record's id
is the one the format's reader gives it (its ``id``, its answer file's name, ``<tool>/<k>`` for
ToolAlpaca, else a hash of its content: :func:`~toolfactory.formats.base.record_id`; records of
one content share it, and were accepted alike), so the policies apply whatever the order the
files are read in: the export's folder, one split of it, one answer file.

A format that changes what a recipe's policy judges says so per record (:class:`FormatChange`):
ToolBench ends every path with a ``Finish`` call, one call more than the factory counted against
the recipe's ``max_steps`` (:data:`FINISH_ADDED`); a ToolAlpaca entry documents every function of
its tool for all its records, so a record can be offered the ``Finish`` of another record's
ToolLLM path, whose rule (``filter_search_not_finished``) cannot judge it as the factory did
(:data:`FINISH_OFFERED`).

:func:`find` looks for the ``PROVENANCE.md`` of the export an input belongs to (the input's folder
and up to three folders above it, the input being the export's folder or one of the files or
folders it lists under ``files``) and reads its ``verify`` block into an :class:`ExportPolicy`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, NamedTuple, Optional, Tuple

import yaml

from toolfactory.errors import ConfigError
from toolfactory.formats.base import read_text
from toolfactory.models import Dialogue
from toolfactory.stages.verify.limits import Limits
from toolfactory.stages.verify.policy import Policy, for_recipe

NOTE = "PROVENANCE.md"  # beside every export's files (toolfactory/export/card.py)
LEVELS = 3  # folders above an input's folder where its export's note may be (answer/<split>/<file>.json)
RUN_CONFIGURATION = "the run's configuration"
DEFAULTS = "defaults (the run has no manifest)"


@dataclass(frozen=True)
class FormatChange:
    """What a format changed in a record that its recipe's policy judges."""

    name: str
    added_calls: int = 0
    """Calls the format added (counted against ``max_steps``)."""
    not_applicable: frozenset[str] = frozenset()
    """Rules whose premise the format changed for the record."""


FINISH_ADDED = FormatChange("Finish added", added_calls=1)
FINISH_OFFERED = FormatChange("Finish offered by its entry", not_applicable=frozenset({"filter_search_not_finished"}))
Group = Tuple[str, Optional[FormatChange]]  # (recipe, what the format changed in its records)


@dataclass(frozen=True)
class Judging:
    """How a group of records is judged: its recipe's policy, and the rules the format left unable
    to judge them as the factory did."""

    policy: Policy
    not_applicable: frozenset[str] = frozenset()
    change: str = ""

    def to_front_matter(self) -> dict[str, Any]:
        policy = self.policy
        out: dict[str, Any] = {"recipe": policy.name, "max_steps": policy.max_steps, "keep_error_recovery": policy.keep_error_recovery,
                               "builtin_functions": sorted(policy.builtin_functions)}
        if self.change:
            out.update(change=self.change, not_applicable=sorted(self.not_applicable))
        return out

    @classmethod
    def from_front_matter(cls, key: str, value: Any) -> Judging:
        if not isinstance(value, dict):
            raise ValueError(f"policies.{key} must be a mapping")
        steps, recovery, builtins = value.get("max_steps"), value.get("keep_error_recovery"), value.get("builtin_functions") or []
        not_applicable = value.get("not_applicable") or []
        if steps is not None and (not isinstance(steps, int) or isinstance(steps, bool) or steps < 0):
            raise ValueError(f"policies.{key}.max_steps must be a whole number or null, not {steps!r}")
        if not isinstance(recovery, bool):
            raise ValueError(f"policies.{key}.keep_error_recovery must be true or false, not {recovery!r}")
        for name, names in (("builtin_functions", builtins), ("not_applicable", not_applicable)):
            if not isinstance(names, list) or not all(isinstance(item, str) for item in names):
                raise ValueError(f"policies.{key}.{name} must be a list of names")
        policy = Policy(str(value.get("recipe") or key), steps, recovery, frozenset(builtins))
        return cls(policy, frozenset(not_applicable), str(value.get("change") or ""))


def judging(recipe: str, change: FormatChange | None, max_steps: Mapping[str, int], keep_error_recovery: list[str]) -> Judging:
    """How the verify stage judged a record of `recipe`, for the record as the format changed it."""
    policy = for_recipe(recipe, dict(max_steps), keep_error_recovery)
    if change is None:
        return Judging(policy)
    steps = None if policy.max_steps is None else policy.max_steps + change.added_calls
    return Judging(replace(policy, max_steps=steps), change.not_applicable, change.name)


@dataclass(frozen=True)
class ExportPolicy:
    """The verify settings of an export and the policy of each of its records (see the module doc)."""

    read_as: str | None
    policies: Mapping[str, Judging]
    default: str | None
    """The key in :attr:`policies` of every record not in :attr:`records`."""
    records: Mapping[str, str] = field(default_factory=dict)
    """Record id → key in :attr:`policies`, for the records not judged by :attr:`default`."""
    disabled_rules: frozenset[str] = frozenset()
    limits: Limits = Limits()
    settings: str = RUN_CONFIGURATION
    source: str = ""
    """The ``PROVENANCE.md`` it was read from (empty for one being written)."""

    @classmethod
    def of_run(cls, recipes: Iterable[str], read_back: Mapping[Group, Iterable[str]], read_as: str | None, *,
               max_steps: Mapping[str, int], keep_error_recovery: Iterable[str], disabled_rules: Iterable[str] = (),
               limits: Limits = Limits(), settings: str = RUN_CONFIGURATION) -> ExportPolicy:
        """The policy of an export: `recipes` the recipe of each exported record, `read_back` the
        ids its reader gives them by group, the other arguments the run's verify settings."""
        recovery = list(keep_error_recovery)
        counts: Counter[str] = Counter()
        policies: dict[str, Judging] = {}
        ids: dict[str, list[str]] = {}
        groups: dict[Group, list[str]] = {(recipe, None): [] for recipe in sorted(set(recipes))}
        groups.update({group: list(records) for group, records in read_back.items()})
        for (recipe, change), records in groups.items():
            judged, plain = judging(recipe, change, max_steps, recovery), judging(recipe, None, max_steps, recovery)
            same = (judged.policy, judged.not_applicable) == (plain.policy, plain.not_applicable)
            key = recipe if same else f"{recipe}, {judged.change}"
            policies[key] = plain if same else judged
            ids.setdefault(key, []).extend(records)
            counts[key] += len(records)
        if not read_back:  # no reader: the records name their recipe where the format keeps it
            counts = Counter(recipes)
        default = max(sorted(counts), key=lambda key: counts[key]) if counts else None
        records = {record: key for key, listed in ids.items() if key != default for record in listed}
        return cls(read_as, dict(sorted(policies.items())), default, records, frozenset(disabled_rules), limits, settings)

    def of(self, dialogue: Dialogue) -> Judging | None:
        """How the factory judged `dialogue` (a path of a ToolBench answer's tree as its answer)."""
        key = self.records.get(dialogue.id) or self.records.get(dialogue.task_id) or self.default
        return self.policies.get(key) if key is not None else None

    def to_front_matter(self) -> dict[str, Any]:
        by_key: dict[str, list[str]] = {}
        for record, key in self.records.items():
            by_key.setdefault(key, []).append(record)
        return {
            "read_as": self.read_as,
            "settings": self.settings,
            "disabled_rules": sorted(self.disabled_rules),
            "max_depth": self.limits.max_depth,
            "max_record_chars": self.limits.max_chars,
            "policies": {key: judged.to_front_matter() for key, judged in self.policies.items()},
            "policy": self.default,
            "records": {key: sorted(ids) for key, ids in sorted(by_key.items())},
        }

    @classmethod
    def from_front_matter(cls, value: Any, source: str = "") -> ExportPolicy:
        """The policy of a ``verify`` block; ValueError names what is wrong with it."""
        if not isinstance(value, dict):
            raise ValueError("verify must be a mapping")
        policies_value = value.get("policies") or {}
        records_value = value.get("records") or {}
        if not isinstance(policies_value, dict) or not isinstance(records_value, dict):
            raise ValueError("verify.policies and verify.records must be mappings")
        policies = {str(key): Judging.from_front_matter(str(key), item) for key, item in policies_value.items()}
        default = value.get("policy")
        named = {str(key) for key in records_value} | ({str(default)} if default is not None else set())
        unknown = sorted(named - set(policies))
        if unknown:
            raise ValueError(f"no entry under policies for {unknown}")
        records: dict[str, str] = {}
        for key, ids in records_value.items():
            if not isinstance(ids, list):
                raise ValueError(f"records.{key} must be a list of record ids")
            records.update({str(record): str(key) for record in ids})
        depth, chars = value.get("max_depth", Limits.max_depth), value.get("max_record_chars", Limits.max_chars)
        if not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in (depth, chars)):
            raise ValueError("max_depth and max_record_chars must be positive whole numbers")
        disabled = value.get("disabled_rules") or []
        if not isinstance(disabled, list):
            raise ValueError("disabled_rules must be a list of rule codes")
        read_as = value.get("read_as")
        return cls(None if read_as is None else str(read_as), policies, None if default is None else str(default), records,
                   frozenset(str(code) for code in disabled), Limits(depth, chars), str(value.get("settings") or ""), source)


def front_matter(text: str) -> dict[str, Any] | None:
    """The YAML front matter of a note (between its first two ``---`` lines), or None without one."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    end = next((i for i, line in enumerate(lines[1:], start=1) if line.strip() == "---"), None)
    if end is None:
        return None
    value = yaml.safe_load("\n".join(lines[1:end]))
    return value if isinstance(value, dict) else None


class Found(NamedTuple):
    """What :func:`find` found: the export's policy, or None and why none applies."""

    policy: ExportPolicy | None
    why_not: str = ""


def _listed(relative: str, files: Iterable[str]) -> bool:
    """Whether the input at `relative` (to the export's folder) is the export's folder, one of its
    files or folders (``answer/train/``), a folder that holds some, or a file inside one."""
    if relative == ".":
        return True
    for name in files:
        folder = name.rstrip("/")
        if relative == folder or folder.startswith(relative + "/") or (name.endswith("/") and relative.startswith(name)):
            return True
    return False


def find(path: str | Path, fmt: str) -> Found:
    """The policy of the export `path` belongs to, when its note says `fmt` reads it back; a
    ConfigError names a note whose ``verify`` block cannot be read."""
    path = Path(path).absolute()
    start = path if path.is_dir() else path.parent
    for folder in [start, *start.parents][: LEVELS + 1]:
        note = folder / NOTE
        if not note.is_file():
            continue
        try:
            meta = front_matter(read_text(note))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise ConfigError(f"{note}: cannot read its front matter ({type(exc).__name__}); give --policy to verify without it") from None
        if meta is None or "verify" not in meta:
            return Found(None, f"{note} holds no verify settings")
        files = meta.get("files") if isinstance(meta.get("files"), dict) else {}
        if not _listed(path.relative_to(folder).as_posix(), files):
            return Found(None, f"{path} is none of the files {note} lists")
        try:
            policy = ExportPolicy.from_front_matter(meta["verify"], str(note))
        except ValueError as exc:
            raise ConfigError(f"{note}: verify: {exc}; give --policy to verify without it") from None
        if policy.read_as != fmt:
            read_as = f"read as --format {policy.read_as}" if policy.read_as else "read by no format of verify"
            return Found(None, f"{note} is of a {meta.get('format')} export, {read_as}")
        return Found(policy)
    return Found(None, f"no {NOTE} of an export beside {path}")


__all__ = ["FINISH_ADDED", "FINISH_OFFERED", "NOTE", "ExportPolicy", "FormatChange", "Found", "Judging", "find", "front_matter"]
