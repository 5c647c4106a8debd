"""Which committed files of a run, and of the pool it reads, are missing or damaged, and which
shards a re-run builds again for them (docs/architecture.md §4, rule 10).

A shard is done when its main part exists (rule 2), but a part that exists is not necessarily
whole: a disk that filled up, a copy cut short or a faulty tool can damage it after its commit.
Each committed file's size and SHA-256 are recorded before it is written
(:mod:`toolfactory.storage.checksums`); :func:`check_run` compares what storage holds with them:

* a planned shard's main and rejected parts against its metrics sidecar, and the sidecar itself
  (one that is not JSON is damage too); a main part that is gone while a committed shard read it;
* the run's inputs, stored when it was planned (``sources/``, ``documents/``);
* the pool files its shards still to run will read, and those the run wrote (``pool/<kind>/_sums/``).

Sizes come from one listing per prefix (on S3 too), so the default check reads only the
sidecars; with ``checksums`` every file is read and hashed. A file written before sums were
recorded has none to compare with: it must open as Parquet.

:func:`shards_to_rebuild` adds to the damaged shards every shard that read them, transitively
(one-to-one chains, fan-in stages, supplements' ``prior``, …): what read damaged data is not
trusted either. :func:`uncommit` removes their main parts, downstream first, so that a crash
half-way leaves the damaged shard still visible to the next check, and the shard protocol
rebuilds them like any shard that was never run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterator

from toolfactory.storage.checksums import MISSING, Damage, FileSum, check_file, read_sum
from toolfactory.run.manifest import manifest_path
from toolfactory.run.outcome import rerun_command
from toolfactory.run.pool import DIALOGUES, TOOLS, TREE
from toolfactory.storage.shards import FILES, METRICS_UNREADABLE, ShardPaths, read_sidecar
from toolfactory.stages import ShardSpec
from toolfactory.storage import ObjectStore

POOL_KINDS = (TOOLS, TREE, DIALOGUES)
_RUN_INPUT = re.compile(r"runs/[^/]+/(sources|documents)/part-(\d+)\.parquet")


@dataclass
class RunCheck:
    """What :func:`check_run` found."""

    run_id: str
    checked: int = 0  # files compared with their record
    damaged: list[Damage] = field(default_factory=list)
    shards: set[tuple[str, int]] = field(default_factory=set)  # planned shards with a damaged file
    # damage a re-run of this run cannot repair: its stored inputs, other runs' pool files
    beyond: list[Damage] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.damaged


def check_run(store: ObjectStore, run_id: str, plan: dict[str, list[ShardSpec]], checksums: bool = False) -> RunCheck:
    """The damaged committed files of run `run_id` (planned as `plan`), and of the pool files it
    reads or wrote. Reads nothing but sidecars unless `checksums` (module doc)."""
    check = RunCheck(run_id)
    sizes = store.sizes(f"runs/{run_id}/")
    specs = [spec for specs in plan.values() for spec in specs]
    readers = _readers(specs)
    for spec in specs:
        paths = ShardPaths(run_id, spec.stage, spec.index)
        found = _shard_damage(store, paths, sizes, checksums, check)
        if not found and paths.main not in sizes and any(
                _read_it(store, ShardPaths(run_id, r.stage, r.index), paths.main, sizes) for r in readers.get(paths.main, ())):
            found = [Damage(paths.main, MISSING, "read by a committed shard, no longer in storage")]
        if found:
            check.damaged += found
            check.shards.add((spec.stage, spec.index))
    stored = {(m[1], int(m[2])) for spec in specs for path in spec.inputs if (m := _RUN_INPUT.fullmatch(path))}
    for kind, index in sorted(stored):
        paths = ShardPaths(run_id, kind, index)
        found = _shard_damage(store, paths, sizes, checksums, check)
        if paths.main not in sizes:  # stored when the run was planned: it was there
            found = [Damage(paths.main, MISSING, "stored when the run was planned, no longer in storage")]
        check.damaged += found
        check.beyond += found
    pool_sizes = store.sizes("pool/")
    # Another run's pool file matters to the shards still to run, which will read it.
    pending = [spec for spec in specs if ShardPaths(run_id, spec.stage, spec.index).main not in sizes]
    named = {ref for spec in pending for ref in _strings(spec.params) if ref.startswith("pool/") and ref.endswith(".parquet")}
    own = {path for path in pool_sizes if _pool_file(path) and _writer_stem(path) in _own_stems(run_id, path)}
    for path in sorted(named | own):
        check.checked += 1
        damage = check_file(store, path, pool_sizes.get(path), read_sum(store, path), checksums)
        if damage is not None:
            check.damaged.append(damage)
            if path not in own:
                check.beyond.append(damage)
    return check


def _shard_damage(store: ObjectStore, paths: ShardPaths, sizes: dict[str, int], checksums: bool,
                  check: RunCheck) -> list[Damage]:
    """The damaged files of a committed shard (none for a shard whose main part is absent)."""
    if paths.main not in sizes:
        return []
    check.checked += 1
    try:
        sidecar = read_sidecar(store, paths)
    except ValueError as exc:
        return [Damage(paths.metrics, METRICS_UNREADABLE, " ".join(str(exc).split())[:200])]
    if sidecar is None:
        return [Damage(paths.metrics, MISSING, "written before the main part, no longer in storage")]
    recorded = sidecar.get(FILES) or {}
    found = []
    for path in (paths.rejected, paths.main):
        check.checked += 1
        damage = check_file(store, path, sizes.get(path), FileSum.from_dict(recorded.get(path)), checksums)
        if damage is not None:
            found.append(damage)
    return found


def check_parts(store: ObjectStore, run_id: str, parts: list[str]) -> list[Damage]:
    """The damaged ones among main parts of run `run_id` that a reader is about to read (sizes;
    a part with no readable record, such as imported data, must open as Parquet)."""
    sizes = store.sizes(f"runs/{run_id}/")
    found = []
    for path in parts:
        stage, _, name = path.removeprefix(f"runs/{run_id}/").rpartition("/")
        paths = ShardPaths(run_id, stage, int(name.removeprefix("part-").removesuffix(".parquet")))
        try:
            recorded = ((read_sidecar(store, paths) or {}).get(FILES) or {}).get(path)
        except ValueError:
            recorded = None
        damage = check_file(store, path, sizes.get(path), FileSum.from_dict(recorded), False)
        if damage is not None:
            found.append(damage)
    return found


def shards_to_rebuild(check: RunCheck, plan: dict[str, list[ShardSpec]], run_id: str) -> list[ShardSpec]:
    """The damaged shards and every shard that read one of them, transitively, in plan order."""
    specs = [spec for specs in plan.values() for spec in specs]
    readers = _readers(specs)
    chosen = set(check.shards)
    todo = [spec for spec in specs if (spec.stage, spec.index) in chosen]
    while todo:
        spec = todo.pop()
        for reader in readers.get(ShardPaths(run_id, spec.stage, spec.index).main, ()):
            if (reader.stage, reader.index) not in chosen:
                chosen.add((reader.stage, reader.index))
                todo.append(reader)
    return [spec for spec in specs if (spec.stage, spec.index) in chosen]


def uncommit(store: ObjectStore, run_id: str, specs: list[ShardSpec]) -> None:
    """Remove the commit marker (main part) of `specs`, the last in plan order first: a crash
    half-way leaves the damaged shard, upstream, for the next check to find again."""
    for spec in reversed(specs):
        store.delete(ShardPaths(run_id, spec.stage, spec.index).main)


def pool_damage(store: ObjectStore) -> list[Damage]:
    """The damaged files of the pool (every kind): those a new run leaves out of its plan."""
    sizes = store.sizes("pool/")
    found = []
    for path in sorted(sizes):
        if _pool_file(path) and (damage := check_file(store, path, sizes[path], read_sum(store, path), False)) is not None:
            found.append(damage)
    return found


def pool_advice(store: ObjectStore, path: str, endpoint_url: str | None = None, region: str | None = None) -> str:
    """What makes a damaged pool file whole again: a re-run of the run that wrote it, when that run
    is on this root (it publishes its additions again from its committed shards); else removing it."""
    stem = _writer_stem(path)
    for writer in (stem, stem.rsplit(".", 1)[0]):
        if store.exists(manifest_path(writer)):
            return f"`{rerun_command(writer, store, endpoint_url, region)}` writes it again"
    return f"no run on this root wrote it: delete {store.uri(path)} to keep it out of every later run's view"


def _pool_file(path: str) -> bool:
    """A pool file (`pool/<kind>/<name>.parquet`), not a record of one nor the lease."""
    return any(path.startswith(f"{kind}/") and "/" not in path[len(kind) + 1:] for kind in POOL_KINDS) and path.endswith(".parquet")


def _writer_stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].removesuffix(".parquet")


def _own_stems(run_id: str, path: str) -> set[str]:
    """The names run `run_id` gives its pool files (`<run_id>`, `<run_id>.<k>` for supplements)."""
    stem = _writer_stem(path)
    head, _, tail = stem.rpartition(".")
    return {run_id} | ({stem} if head == run_id and tail.isdigit() else set())


def _read_it(store: ObjectStore, reader: ShardPaths, path: str, sizes: dict[str, int]) -> bool:
    """Whether the committed shard `reader` read `path`: a fan-in shard that proceeded without it
    (`run.fan_in: proceed`) names it among its missing inputs, and a supplement reads it later."""
    if reader.main not in sizes:
        return False
    try:
        sidecar = read_sidecar(store, reader) or {}
    except ValueError:  # its own sidecar is damaged: that shard is named for it
        return True
    return path not in (sidecar.get("missing_inputs") or ())


def _readers(specs: list[ShardSpec]) -> dict[str, list[ShardSpec]]:
    """Path -> the shards that read it: as an input, or named in their params (pool files,
    a supplement's earlier parts, a tasks shard's anchors)."""
    readers: dict[str, list[ShardSpec]] = {}
    for spec in specs:
        for path in {*spec.inputs, *_strings(spec.params)}:
            readers.setdefault(path, []).append(spec)
    return readers


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)
