"""Decontamination against BFCL, ToolBench and ToolAlpaca: recall, false positives, cost.

    python -m benchmarks.decontamination [--no-demo] [--demo-root PATH] [--demo-pairs 3] [--out PATH]

1. **Recall on planted items.** Every item of each built-in set (BFCL from the installed
   ``bfcl-eval``, ToolBench and ToolAlpaca from the shipped index) is planted as a record's user
   turns, eight ways: ``verbatim``; ``cased`` (each word upper, lower or title case); ``rotated``
   (the words from a random point on, then those before: clauses moved); ``shuffled`` (a random
   permutation of the words); ``embedded`` (inside a longer request); ``one_word`` (one word
   replaced, order kept); ``shuffled_one_word`` (both); ``tools_edit`` (a quarter of the words
   replaced, the item's functions offered). The first four are the paraphrases the rule must
   catch; the others show what its thresholds reach. Recall per set and kind, and the test that
   caught each.
2. **False positives** on clean records: the 300 valid dialogues of the verify stage's labelled
   corpus, the 130 queries of the instruction seeds (ToolLLM-style requests written for this
   project) and the dialogues of the demo (``toolfactory run --config configs/quickstart.yaml``
   in a temporary root, with decontamination on and then off, ``--demo-pairs`` times (3),
   interleaved; ``--demo-root`` reads the latest run of a root instead, ``--no-demo`` skips it):
   records flagged per set.
3. **Thresholds.** Exact similarities (not MinHash estimates) of the planted near copies to
   their item, and the highest similarity of any clean record to any item, for the word-set
   (``bag``) and 3-shingle (``ordered``) tests; clean records sharing a word run of 6, 8, 10 and
   13 words with an item; and how many items have a *different* item of their own set at each
   similarity (template siblings: BFCL's items differ by a number or a name).
   The last is measured on 500 items of each set.
4. **Cost.** Reading the sets, building the index (once per process), microseconds per record
   checked; and, from the demo, the wall time of the run and of its measure and select stages
   with decontamination on and off.

Writes ``benchmarks/results/decontamination.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import pyarrow.parquet as pq

from benchmarks._common import RESULTS_DIR, machine_info, median, table, write_json
from toolfactory.catalog.seeds import load_instruction_seeds
from toolfactory.config import DecontaminateConfig
from toolfactory.curation import contamination
from toolfactory.curation.contamination import ContaminationIndex, Thresholds, _units
from toolfactory.curation.dedup import SHINGLE, shingles, words
from toolfactory.curation.evaluation_sets import EvaluationSet, Item, record_function_names
from toolfactory.models import Dialogue
from benchmarks.corpus import valid_dialogues

REPO = Path(__file__).resolve().parents[1]
DEMO_TIMEOUT_S = 900
FILLER = ("kindly", "perhaps", "quickly", "certainly", "basically", "honestly", "maybe", "truly", "surely", "simply")
PREFIX, SUFFIX = "Hello there, I have a small favour to ask of you today.", "Many thanks in advance for your help with this!"
SWEEP = {"bag": (0.5, 0.6, 0.7, 0.8, 0.9), "ordered": (0.3, 0.4, 0.5, 0.6, 0.7), "tools": (0.4, 0.5, 0.6, 0.7, 0.8)}
RUNS = (6, 8, 10, 13)
SIBLINGS = 500  # items per set whose nearest other item is measured


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


# --- planting ------------------------------------------------------------------------------


def _replace(words: list[str], share: float, rng: random.Random) -> list[str]:
    out = list(words)
    for i in rng.sample(range(len(out)), max(1, round(share * len(out)))):
        out[i] = rng.choice(FILLER)
    return out


def _rotate(words: list[str], rng: random.Random) -> list[str]:
    k = rng.randrange(1, len(words)) if len(words) > 1 else 0
    return words[k:] + words[:k]


def _shuffle(words: list[str], rng: random.Random) -> list[str]:
    out = list(words)
    rng.shuffle(out)
    return out


KINDS: dict[str, Callable[[list[str], random.Random], list[str]]] = {
    "verbatim": lambda w, rng: w,
    "cased": lambda w, rng: [rng.choice((str.upper, str.lower, str.title))(x) for x in w],
    "rotated": _rotate,
    "shuffled": _shuffle,
    "embedded": lambda w, rng: [*PREFIX.split(), *w, *SUFFIX.split()],
    "one_word": lambda w, rng: _replace(w, 0.0, rng),
    "shuffled_one_word": lambda w, rng: _shuffle(_replace(w, 0.0, rng), rng),
    "tools_edit": lambda w, rng: _replace(w, 0.25, rng),
}
REQUIRED = ("verbatim", "cased", "rotated", "shuffled")


def plant(item: Item, kind: str) -> list[str]:
    rng = random.Random(f"{item.id}/{kind}")
    return [" ".join(KINDS[kind](turn.split(), rng)) for turn in item.turns]


def recall(index: ContaminationIndex, sets: Sequence[EvaluationSet]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for evaluation in sets:
        per_kind = {}
        for kind in KINDS:
            items = [i for i in evaluation.items if kind != "tools_edit" or i.functions]
            caught, tests, missed = 0, Counter(), []
            long_items = long_caught = 0
            for item in items:
                functions = frozenset(item.functions) if kind == "tools_edit" else frozenset()
                found = [f for f in index.find_turns(plant(item, kind), functions) if f.benchmark == evaluation.name]
                long = all(len(words(turn)) >= index.thresholds.min_words for turn in item.turns)
                long_items += long
                if found:
                    caught += 1
                    long_caught += long
                    tests[found[0].test] += 1
                elif len(missed) < 5:
                    missed.append(item.id)
            per_kind[kind] = {"items": len(items), "caught": caught, "recall": round(caught / len(items), 4) if items else None,
                              "long_items": long_items, "long_caught": long_caught,
                              "by_test": dict(tests.most_common()), "missed_examples": missed}
        out[evaluation.name] = per_kind
    return out


# --- clean records -------------------------------------------------------------------------


class Clean:
    def __init__(self, name: str, records: list[tuple[str, list[str], frozenset[str]]]) -> None:
        self.name, self.records = name, records


def clean_sets(demo_records: list[Dialogue]) -> list[Clean]:
    def of(d: Dialogue) -> tuple[str, list[str], frozenset[str]]:
        turns = [m.content for m in d.messages if m.role == "user" and isinstance(m.content, str)]
        return d.id, turns, record_function_names(fn.name for fn in d.tools)

    seeds = load_instruction_seeds()
    queries = [(f"seed-{n}", [q.query], frozenset()) for n, q in
               enumerate(q for group in (seeds.single_tool, seeds.multi_tool) for s in group for q in s.queries)]
    sets = [Clean("valid_corpus_300", [of(d) for d in valid_dialogues(300)]), Clean("instruction_seeds", queries)]
    if demo_records:
        sets.append(Clean("demo", [of(d) for d in demo_records]))
    return sets


def false_positives(index: ContaminationIndex, clean: Sequence[Clean]) -> dict[str, Any]:
    out = {}
    for c in clean:
        flagged = {rid: [f._asdict() for f in found] for rid, turns, fns in c.records if (found := index.find_turns(turns, fns))}
        out[c.name] = {"records": len(c.records), "flagged": len(flagged), "examples": dict(list(flagged.items())[:5])}
    return out


# --- exact similarities for the thresholds --------------------------------------------------


class Exact:
    """Exact Jaccard of word sets and of 3-shingle sets against every item unit (inverted index)."""

    def __init__(self, sets: Sequence[EvaluationSet], min_words: int) -> None:
        self.units: list[tuple[str, str, frozenset[str], list[str]]] = []
        for s in sets:
            for item in s.items:
                for tokens in _units(item.turns):
                    if len(tokens) >= min_words:
                        self.units.append((s.name, item.id, frozenset(item.functions), tokens))
        self.bags = [set(u[3]) for u in self.units]
        self.shingled = [shingles(u[3], SHINGLE) for u in self.units]
        self.post: dict[str, list[int]] = defaultdict(list)
        for k, bag in enumerate(self.bags):
            for word in bag:
                self.post[word].append(k)
        self.grams = {n: {" ".join(u[3][i : i + n]) for u in self.units for i in range(len(u[3]) - n + 1)} for n in RUNS}

    def nearest(self, tokens: list[str], skip: Callable[[int], bool] = lambda k: False) -> tuple[float, float, int | None]:
        """(best word-set Jaccard, best 3-shingle Jaccard, unit of the best word-set match)."""
        bag, shingled = set(tokens), shingles(tokens, SHINGLE)
        shared: Counter[int] = Counter()
        for word in bag:
            shared.update(self.post.get(word, ()))
        best_bag, best_ordered, best = 0.0, 0.0, None
        for k, n in shared.items():
            if skip(k):
                continue
            j = n / (len(bag) + len(self.bags[k]) - n)
            if j > best_bag:
                best_bag, best = j, k
            if j >= 0.2:
                inter = len(shingled & self.shingled[k])
                best_ordered = max(best_ordered, inter / (len(shingled) + len(self.shingled[k]) - inter))
        return best_bag, best_ordered, best

    def runs(self, tokens: list[str]) -> dict[int, bool]:
        return {n: any(" ".join(tokens[i : i + n]) in self.grams[n] for i in range(len(tokens) - n + 1)) for n in RUNS}


def thresholds(sets: Sequence[EvaluationSet], clean: Sequence[Clean], min_words: int) -> dict[str, Any]:
    exact = Exact(sets, min_words)
    near: dict[str, list[tuple[float, float]]] = {"one_word": [], "shuffled_one_word": [], "tools_edit": []}
    for s in sets:
        for item in s.items:
            own = [u for u in _units(item.turns) if len(u) >= min_words]
            for kind in near:
                if not own or (kind == "tools_edit" and not item.functions):
                    continue
                units = [u for u in _units(plant(item, kind)) if len(u) >= min_words]
                if units:  # each planted unit against its own item's units
                    near[kind].append((max(jaccard(set(u), set(o)) for u in units for o in own),
                                       max(jaccard(shingles(u, SHINGLE), shingles(o, SHINGLE)) for u in units for o in own)))
    cleaned: dict[str, dict[str, Any]] = {}
    clean_scores: list[tuple[float, float, float]] = []
    for c in clean:
        runs: Counter[int] = Counter()
        top_bag = top_ordered = 0.0
        for _, turns, functions in c.records:
            record = (0.0, 0.0, 0.0)  # word set, 3-shingles, word set among items whose functions it offers
            hit = {n: False for n in RUNS}
            for tokens in _units(turns):
                b, o, _ = exact.nearest(tokens)
                offered = exact.nearest(tokens, skip=lambda k: not exact.units[k][2] or not exact.units[k][2] <= functions)[0]
                record = (max(record[0], b), max(record[1], o), max(record[2], offered))
                hit = {n: hit[n] or found for n, found in exact.runs(tokens).items()}
            clean_scores.append(record)
            top_bag, top_ordered = max(top_bag, record[0]), max(top_ordered, record[1])
            runs.update(n for n, found in hit.items() if found)
        cleaned[c.name] = {"max_bag": round(top_bag, 3), "max_ordered": round(top_ordered, 3),
                           "max_bag_functions_offered": round(max((r[2] for r in clean_scores[-len(c.records):]), default=0.0), 3),
                           "records_sharing_a_run_of": {n: runs[n] for n in RUNS}}
    siblings = {}
    for name in sorted({u[0] for u in exact.units}):
        mine = [k for k, u in enumerate(exact.units) if u[0] == name]
        scores = []
        for k in random.Random(name).sample(mine, min(SIBLINGS, len(mine))):
            text = exact.units[k][3]
            b, o, _ = exact.nearest(text, skip=lambda j, k=k, text=text: exact.units[j][0] != name or j == k
                                    or exact.units[j][1] == exact.units[k][1] or exact.units[j][3] == text)
            scores.append((b, o))
        siblings[name] = {"items_sampled": len(scores),
                          "bag": {t: sum(b >= t for b, _ in scores) for t in SWEEP["bag"]},
                          "ordered": {t: sum(o >= t for _, o in scores) for t in SWEEP["ordered"]}}

    contained = short_items_contained(sets, min_words)

    def share(values: Iterable[bool]) -> float:
        values = list(values)
        return round(sum(values) / len(values), 4) if values else float("nan")

    sweep = {
        "bag": {t: {"one_word": share(b >= t for b, _ in near["one_word"]),
                    "shuffled_one_word": share(b >= t for b, _ in near["shuffled_one_word"]),
                    "clean_flagged": sum(b >= t for b, _, _ in clean_scores)} for t in SWEEP["bag"]},
        "ordered": {t: {"one_word": share(o >= t for _, o in near["one_word"]),
                        "clean_flagged": sum(o >= t for _, o, _ in clean_scores)} for t in SWEEP["ordered"]},
        "tools": {t: {"tools_edit": share(b >= t for b, _ in near["tools_edit"]),
                      "clean_flagged": sum(offered >= t for _, _, offered in clean_scores)} for t in SWEEP["tools"]},
    }
    return {"sweep": sweep, "clean": cleaned, "siblings": siblings, "short_items_inside_other_items": contained}


def short_items_contained(sets: Sequence[EvaluationSet], min_words: int) -> dict[int, dict[str, int]]:
    """Per length 3 to 12 words: the distinct item turns of that length, and how many of them are a
    run of words inside a *different*, longer item turn of any set: a phrase many requests share
    is no sign of a copy, which is why items shorter than ``min_words`` must match a whole turn."""
    turns = {" ".join(t) for s in sets for item in s.items for t in (words(x) for x in item.turns) if t}
    by_length: dict[int, set[str]] = defaultdict(set)
    for text in turns:
        by_length[len(text.split())].add(text)
    out = {}
    for n in range(3, 13):
        grams: set[str] = set()
        for text in turns:
            tokens = text.split()
            if len(tokens) > n:
                grams.update(" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
        out[n] = {"items": len(by_length[n]), "inside_another": len(by_length[n] & grams)}
    return out


# --- the demo ------------------------------------------------------------------------------


def demo(root: Path, run: bool, enabled: bool = True) -> dict[str, Any]:
    tf = str(Path(sys.executable).with_name("toolfactory"))
    seconds = None
    if run:
        started = time.perf_counter()
        done = subprocess.run([tf, "run", "--config", str(REPO / "configs" / "quickstart.yaml"), "--set", f"storage.root={root}",
                               "--set", f"curate.decontaminate.enabled={str(enabled).lower()}"],
                              capture_output=True, text=True, cwd=root, timeout=DEMO_TIMEOUT_S)
        seconds = round(time.perf_counter() - started, 1)
        if done.returncode not in (0, 1):
            sys.exit(f"the demo run exited with {done.returncode}: {done.stderr[-2000:]}")
    runs = sorted((root / "runs").glob("*/verify"), key=lambda p: p.stat().st_mtime)
    if not runs:
        sys.exit(f"no run under {root}")
    folder = runs[-1].parent
    records = [Dialogue.model_validate(json.loads(row["record"])) for part in sorted(folder.glob("verify/part-*.parquet"))
               for row in pq.read_table(part, columns=["record"]).to_pylist()]
    stats = json.loads(subprocess.run([tf, "stats", folder.name, "--json", "--set", f"storage.root={root}"], check=True,
                                      capture_output=True, text=True, cwd=root).stdout)
    stages = {s["stage"]: s for s in stats["stages"]}
    curate = stages.get("curate", {})
    return {"run_id": folder.name, "decontaminate": enabled, "run_seconds": seconds, "verified_records": len(records),
            "stage_wall_s": {name: stages[name].get("wall_s") for name in ("measure", "select", "curate") if name in stages},
            "contaminated_rejections": {k: v for k, v in (curate.get("rejections") or {}).items() if k.startswith("contaminated_")},
            "select_profile": {k: v for k, v in (stages.get("select", {}).get("profile") or {}).items() if k.startswith("contamination")},
            "records": records}


def demo_overhead(demos: list[dict[str, Any]]) -> dict[str, Any]:
    """Median run wall time and measure-stage time (its shards' walls summed), on and off."""
    out: dict[str, Any] = {}
    for enabled, label in ((True, "on"), (False, "off")):
        runs = [d for d in demos if d["decontaminate"] is enabled and d["run_seconds"] is not None]
        if runs:
            out[label] = {"runs": len(runs), "run_s": median([d["run_seconds"] for d in runs]),
                          "measure_s": round(median([d["stage_wall_s"].get("measure", 0.0) for d in runs]), 3)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-demo", action="store_true", help="skip the demo runs")
    parser.add_argument("--demo-root", default=None, help="read the latest run of this storage root instead of running the demo")
    parser.add_argument("--demo-pairs", type=int, default=3, help="demo runs with decontamination on, then off, this many times")
    parser.add_argument("--out", default=str(RESULTS_DIR / "decontamination.json"))
    args = parser.parse_args()
    settings = DecontaminateConfig()
    started = time.perf_counter()
    sets = contamination.evaluation_sets(settings)
    read_s = time.perf_counter() - started
    started = time.perf_counter()
    index = ContaminationIndex(sets, Thresholds.of(settings))
    build_s = time.perf_counter() - started
    if index.skipped():
        print(f"skipped: {index.skipped()}")

    demos: list[dict[str, Any]] = []
    if not args.no_demo:
        if args.demo_root:
            demos.append(demo(Path(args.demo_root), run=False))
        else:
            for _ in range(args.demo_pairs):  # interleaved: the machine's load drifts
                for enabled in (True, False):
                    with tempfile.TemporaryDirectory(prefix="toolfactory-decontamination-") as folder:
                        demos.append(demo(Path(folder), run=True, enabled=enabled))
    clean = clean_sets(demos[0]["records"] if demos else [])

    found = recall(index, sets)
    started = time.perf_counter()
    fp = false_positives(index, clean)
    checked = sum(len(c.records) for c in clean)
    per_record_us = (time.perf_counter() - started) / checked * 1e6
    measured = thresholds(sets, clean, settings.min_words)

    print(f"index: {index.items()} items, {len(index)} texts indexed; read {read_s:.2f} s, built {build_s:.2f} s; "
          f"{per_record_us:.0f} µs per clean record checked")
    print()
    print(table(["set", *KINDS], [(name, *(f"{k['caught']}/{k['items']}" for k in kinds.values())) for name, kinds in found.items()]))
    print()
    print(table(["clean set", "records", "flagged", "max bag", "max ordered", "max bag, tools", *(f"run {n}" for n in RUNS)],
                [(name, r["records"], r["flagged"], measured["clean"][name]["max_bag"], measured["clean"][name]["max_ordered"],
                  measured["clean"][name]["max_bag_functions_offered"],
                  *measured["clean"][name]["records_sharing_a_run_of"].values()) for name, r in fp.items()]))
    for test, rows in measured["sweep"].items():
        print()
        print(table([f"{test} threshold", *next(iter(rows.values())).keys()], [(t, *r.values()) for t, r in rows.items()]))
    print()
    print(table(["item words", *measured["short_items_inside_other_items"].keys()],
                [(k, *(r[k] for r in measured["short_items_inside_other_items"].values())) for k in ("items", "inside_another")]))
    print()
    print(table(["items of >= min_words", *KINDS], [(name, *(f"{k['long_caught']}/{k['long_items']}" for k in kinds.values()))
                                                     for name, kinds in found.items()]))
    print()
    print(table(["set", "sampled", *(f"bag>={t}" for t in SWEEP["bag"]), *(f"ord>={t}" for t in SWEEP["ordered"])],
                [(name, s["items_sampled"], *s["bag"].values(), *s["ordered"].values()) for name, s in sorted(measured["siblings"].items())]))
    for d in demos:
        print(f"\ndemo {d['run_id']} (decontaminate {d['decontaminate']}): {d['run_seconds']} s, stage wall {d['stage_wall_s']}, "
              f"{d['verified_records']} verified records, rejections {d['contaminated_rejections']}")
    overhead = demo_overhead(demos)
    if overhead:
        print(f"\ndemo medians, decontamination on vs off: {overhead}")
    write_json(Path(args.out), {
        "machine": machine_info(), "thresholds": Thresholds.of(settings).__dict__, "items": index.items(),
        "skipped": index.skipped(), "texts_indexed": len(index),
        "cost": {"read_sets_s": round(read_s, 3), "build_index_s": round(build_s, 3), "us_per_clean_record": round(per_record_us, 1),
                 "clean_records_checked": checked},
        "recall": found, "false_positives": fp, "similarities": measured,
        "demo": [{k: v for k, v in d.items() if k != "records"} for d in demos], "demo_medians": demo_overhead(demos),
    })


if __name__ == "__main__":
    main()
