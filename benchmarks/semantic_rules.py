"""How often the model-independent semantic rules flag released data, and whether they are right.

    python -m benchmarks.semantic_rules [--data DIR] [--bfcl-multi-turn N] [--run RUN_DIR] [--sample K] [--seed S] [--quiet] [--out PATH]

Runs ``arg_value_ungrounded`` and ``arg_text_ungrounded``
(:mod:`toolfactory.stages.verify.rules.argument_grounding`), ``answer_control_token``
(``.control_tokens``) and ``assistant_contradicts_calls`` (``.contradiction``) alone, with their
defaults, over:

* ToolBench's released DFSDT answers (the winning paths, and every path of the trees) and
  ToolAlpaca's golden answers, under ``--data`` (the shared data folder by default), read by
  :mod:`toolfactory.formats`;
* BFCL (the installed ``bfcl-eval`` package's data): the single-turn categories with a possible
  answer (simple, multiple, parallel, parallel_multiple and their ``live_`` forms; Java and
  JavaScript left out, their values being code), each entry a user request and its gold calls,
  each argument the first acceptable value BFCL lists for it other than "" (which means "may be
  left out"); and the first N entries of the multi-turn base category, read (and executed) by
  :mod:`toolfactory.formats.bfcl_multi_turn` (about 90 s for the 200);
* the accepted records of a run (``--run``: a run folder ``<root>/runs/<run_id>``; its
  ``verify/`` parts), e.g. the quickstart's.

For each dataset and rule: the records read, the records flagged (count and share), the
findings; then K flagged records per rule and dataset drawn with ``--seed``, each printed with
what a reader needs to judge it (the finding, the user's turns, the call). Those records were
read by hand: :data:`JUDGED` holds the judgement of each, (rule, dataset, record id) -> (true,
false or derived, why). The table gives per rule and dataset how many of the sample are true,
false (derived ones counted with them) and not judged yet, and the share of all records flagged
wrongly if the sample's share of false positives holds; a sampled record nobody has judged is
counted apart (the figure to bring to 0 before deciding a severity). Then the rule layer's rate
on each dataset (validity rules, one process), with and without these rules.

Writes ``benchmarks/results/semantic_rules.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

from benchmarks._common import REAL_DATA, RESULTS_DIR, machine_info, median, table, write_json
from toolfactory.definitions.convert import normalize_schema
from toolfactory.formats import read
from toolfactory.formats.toolbench import read as read_toolbench
from toolfactory.models import Dialogue, Function, Message, ToolCall
from toolfactory.stages.verify.rules import RULES, Sample, check

CODES = ("arg_value_ungrounded", "arg_text_ungrounded", "answer_control_token", "assistant_contradicts_calls")
BFCL_SINGLE_TURN = ("simple_python", "multiple", "parallel", "parallel_multiple",
                    "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
BFCL_MULTI_TURN = "multi_turn_base"

# (rule, dataset, record id) -> (verdict, why), for the flagged records the sample drew, read by
# hand. "true": the record has what the rule says (an invented value, leaked syntax, ...); "false":
# it does not, the rule is wrong about it; "derived": a value computed or looked up from given
# ones (a converted unit, a date from "tomorrow", an airport code for a city), a false positive of
# a kind the rule cannot avoid, counted with the false ones.
_V, _T = "arg_value_ungrounded", "arg_text_ungrounded"
JUDGED: dict[tuple[str, str, str], tuple[str, str]] = {
    (_V, "toolalpaca-golden", "Auth0/5"): ("true", "permissionName '${string}': a template placeholder, no value"),
    (_V, "toolalpaca-golden", "A Bíblia Digital/0"): ("derived", "language 'English': the language the user writes in"),
    (_V, "toolalpaca-golden", "A Bíblia Digital/3"): ("derived", "language 'English'; verses 36-38 of 'verses 35 to 39'"),
    (_V, "toolalpaca-golden", "A Bíblia Digital/4"): ("derived", "language 'English': the language the user writes in"),
    (_V, "toolalpaca-golden", "A Bíblia Digital/5"): ("derived", "language 'English': the language the user writes in"),
    (_V, "toolalpaca-golden", "Apache Superset/7"): ("true", "sourceId 12345 and dashboardId 67890: the user named them, gave no id"),
    (_V, "toolalpaca-golden", "Apache Superset/8"): ("true", "type 'mysql': the user never says what the data source is"),
    (_T, "toolalpaca-golden", "AniAPI/3"): ("derived", "'Your Lie in April.' as an anime like My Hero Academia: the model's knowledge"),
    (_T, "toolalpaca-golden", "AniAPI/4"): ("true", "'Your Lie in April.' searched to sync progress of Naruto"),
    (_T, "toolalpaca-golden", "AniAPI/5"): ("true", "'Your Lie in April.' searched to sync progress of Attack on Titan"),
    (_T, "toolalpaca-golden", "AbuseIPDB/10"): ("false", "a comment the model composes for a report the user asked for"),
    (_V, "bfcl-single-turn", "simple_python_216"): ("derived", "language 'english': the review's language"),
    (_V, "bfcl-single-turn", "simple_python_293"): ("derived", "track_length 180 for '3 minutes'"),
    (_V, "bfcl-single-turn", "parallel_187"): ("derived", "'2023-05-04' for 'yesterday', today being May 5, 2023"),
    (_V, "bfcl-single-turn", "multiple_123"): ("derived", "52 cards in a deck, 4 kings"),
    (_V, "bfcl-single-turn", "live_parallel_0-0-0"): ("derived", "'Beijing, China' for 北京"),
    (_V, "bfcl-single-turn", "parallel_multiple_98"): ("derived", "'km' for kilometers"),
    (_V, "bfcl-single-turn", "parallel_multiple_155"): ("derived", "26 red cards in a deck"),
    (_V, "bfcl-single-turn", "simple_python_40"): ("derived", "a permeability constant (the gold's value is wrong, but looked up)"),
    (_V, "bfcl-single-turn", "live_multiple_147-58-1"): ("derived", "timespan 10800 and times from 'yesterday midday to 3pm'"),
    (_V, "bfcl-single-turn", "simple_python_231"): ("derived", "'Germany' for 'German history'"),
    (_V, "bfcl-single-turn", "simple_python_238"): ("derived", "1861 for 'during the American Civil War'"),
    (_V, "bfcl-single-turn", "simple_python_309"): ("derived", "'Tampa Bay Buccaneers': Tom Brady's team in 2020"),
    (_V, "bfcl-single-turn", "parallel_multiple_18"): ("derived", "'USD' and 'EUR' for dollars and euros"),
    (_V, "bfcl-single-turn", "multiple_136"): ("derived", "'California' for San Francisco"),
    (_V, "bfcl-single-turn", "parallel_multiple_148"): ("derived", "'EUR', 'GBP' for euros and pounds; 74 inches"),
    (_V, "bfcl-single-turn", "parallel_multiple_180"): ("derived", "height 71 for 5'11\""),
    (_V, "bfcl-single-turn", "simple_python_42"): ("derived", "0.05 H and 0.0001 F for 50mH and 100µF"),
    (_V, "bfcl-single-turn", "live_multiple_219-94-1"): ("derived", "timespan 120 s for 15:30 to 15:32"),
    (_V, "bfcl-single-turn", "simple_python_286"): ("derived", "'04-2022' for April 2022"),
    (_T, "bfcl-single-turn", "parallel_71"): ("derived", "'9x**2 - 4x + 5': the derivative of the given polynomial"),
    (_V, "bfcl-multi-turn", "multi_turn_base_185"): ("true", "insurance_type 'comprehensive': the user names no plan"),
    (_V, "bfcl-multi-turn", "multi_turn_base_62"): ("true", "receiver_id 'USR002' for 'cousin Bob': no call looked it up"),
    (_V, "bfcl-multi-turn", "multi_turn_base_129"): ("derived", "'NVDA' for Nvidia (the user writes it only later)"),
    (_V, "bfcl-multi-turn", "multi_turn_base_113"): ("derived", "'QUAS' for Quasar Ltd."),
    (_V, "bfcl-multi-turn", "multi_turn_base_91"): ("true", "receiver_id 'USR006' for Michael: no call looked it up"),
    (_V, "bfcl-multi-turn", "multi_turn_base_73"): ("true", "fuelAmount 45.0 to fill a tank whose level no call read"),
    (_V, "bfcl-multi-turn", "multi_turn_base_72"): ("true", "fuelAmount 10.0 to double a level no call read"),
    (_V, "bfcl-multi-turn", "multi_turn_base_56"): ("true", "fuelAmount 40 to reach 50 gallons from a level no call read"),
    (_V, "bfcl-multi-turn", "multi_turn_base_190"): ("true", "travel_from 'OKD' for the made-up town Oakendale, no airport looked up"),
    (_V, "bfcl-multi-turn", "multi_turn_base_181"): ("derived", "'JFK' for New York City and 'LAX' for Los Angeles"),
}


def bfcl_data() -> Path | None:
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            yield json.loads(line)


def _first_value(options: Any) -> tuple[bool, Any]:
    """(present, value): the first acceptable value of a BFCL possible answer other than ""."""
    if not isinstance(options, list):
        return True, options
    for option in options:
        if option != "":
            return True, option
    return False, None


def bfcl_single_turn(data: Path, category: str) -> list[Dialogue]:
    """BFCL's `category` entries with their gold calls, as dialogues (module doc)."""
    name = f"BFCL_v4_{category}.json"
    answers = {a["id"]: a["ground_truth"] for a in _lines(data / "possible_answer" / name)}
    out = []
    for entry in _lines(data / name):
        gold = answers.get(entry["id"])
        if not gold:
            continue
        messages = [Message(role=m["role"], content=m["content"]) for turn in entry["question"] for m in turn]
        calls = []
        for n, item in enumerate(gold):
            (function, options), = item.items()
            arguments = {}
            for key, choices in options.items():
                present, value = _first_value(choices)
                if present:
                    arguments[key] = value
            calls.append(ToolCall(id=f"call_{n}", name=function, arguments=json.dumps(arguments, ensure_ascii=False)))
        messages.append(Message(role="assistant", tool_calls=calls))
        tools = [Function(name=f["name"], description=f.get("description") or "", parameters=normalize_schema(f.get("parameters") or {}))
                 for f in entry["function"]]
        out.append(Dialogue(id=entry["id"], task_id=entry["id"], tools=tools, messages=messages, recipe="bfcl"))
    return out


def bfcl_multi_turn(data: Path, limit: int) -> list[Dialogue]:
    """The first `limit` entries of BFCL's multi-turn base category, executed by the reader."""
    import tempfile

    name = f"BFCL_v4_{BFCL_MULTI_TURN}.json"
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "possible_answer").mkdir()
        for part in ("", "possible_answer/"):
            lines = (data / part / name).read_text(encoding="utf-8").splitlines()[:limit]
            (folder / part / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        return [d for d in read(folder / name, "bfcl_multi_turn") if isinstance(d, Dialogue)]


def datasets(args: argparse.Namespace) -> Iterator[tuple[str, list[Dialogue]]]:
    data: Path = args.data
    if (data / "toolbench").is_dir():
        answers = data / "toolbench/answer/G1_answer"
        yield "toolbench-released", [d for d in read_toolbench(answers) if isinstance(d, Dialogue)]
        yield "toolbench-tree", [d for d in read_toolbench(answers, paths="all") if isinstance(d, Dialogue)]
    else:
        print(f"no ToolBench data under {data}: skipped", file=sys.stderr)
    if (data / "toolalpaca").is_dir():
        yield "toolalpaca-golden", [d for d in read(data / "toolalpaca/eval_simulated.json", "toolalpaca") if isinstance(d, Dialogue)]
    else:
        print(f"no ToolAlpaca data under {data}: skipped", file=sys.stderr)
    bfcl = bfcl_data()
    if bfcl is None:
        print("bfcl-eval is not installed: BFCL skipped (pip install --no-deps bfcl-eval==2026.3.23)", file=sys.stderr)
    else:
        single = [d for category in BFCL_SINGLE_TURN for d in bfcl_single_turn(bfcl, category)]
        yield "bfcl-single-turn", single
        if args.bfcl_multi_turn:
            yield "bfcl-multi-turn", bfcl_multi_turn(bfcl, args.bfcl_multi_turn)
    if args.run is not None:
        accepted = args.run / "verify"
        if not accepted.is_dir():
            sys.exit(f"--run {args.run}: no verify/ folder (give a run folder, <root>/runs/<run_id>)")
        yield f"run:{args.run.name}", [d for d in read(accepted, "toolfactory") if isinstance(d, Dialogue)]


def findings(dialogue: Dialogue) -> dict[str, list[tuple[str, str]]]:
    sample = Sample(dialogue)
    return {code: [(v.path, v.message) for v in RULES[code].run(sample)] for code in CODES}


def context(dialogue: Dialogue, path: str) -> list[str]:
    """What a reader needs to judge a finding at `path`: the user's turns and the message."""
    lines = [f"user: {' '.join((m.content or '').split())[:300]}" for m in dialogue.messages if m.role == "user"]
    index = int(path.split("]", 1)[0].split("[", 1)[1]) if path.startswith("messages[") else None
    if index is not None and index < len(dialogue.messages):
        message = dialogue.messages[index]
        if message.content:
            lines.append(f"{message.role}[{index}]: {' '.join(message.content.split())[:300]}")
        for call in message.tool_calls or []:
            lines.append(f"call: {call.name}({call.arguments[:300]})")
    return lines


def rates(dialogues: list[Dialogue], repeats: int = 3) -> tuple[float, float]:
    """Records per second of the whole rule layer (validity) with and without these rules, medians."""
    if not dialogues:
        return 0.0, 0.0
    with_rules: list[float] = []
    without: list[float] = []
    for _ in range(repeats):
        for disabled, out in ((frozenset(), with_rules), (frozenset(CODES), without)):
            start = time.perf_counter()
            for dialogue in dialogues:
                check(dialogue, disabled, policy=None)
            out.append(len(dialogues) / (time.perf_counter() - start))
    return median(with_rules), median(without)


def run(name: str, dialogues: list[Dialogue], k: int, seed: int) -> dict[str, Any]:
    flagged: dict[str, list[tuple[Dialogue, list[tuple[str, str]]]]] = {code: [] for code in CODES}
    start = time.perf_counter()
    for dialogue in dialogues:
        for code, found in findings(dialogue).items():
            if found:
                flagged[code].append((dialogue, found))
    seconds = time.perf_counter() - start
    with_rules, without = rates(dialogues)
    out: dict[str, Any] = {"dataset": name, "records": len(dialogues), "us_per_record": round(1e6 * seconds / max(1, len(dialogues)), 1),
                           "rule_layer_per_s": round(with_rules), "rule_layer_per_s_without": round(without), "rules": {}}
    for code in CODES:
        hits = flagged[code]
        drawn = random.Random(f"{seed}/{name}/{code}").sample(hits, min(k, len(hits)))
        sample = []
        verdicts: Counter[str] = Counter()
        for dialogue, found in drawn:
            path, message = found[0]
            verdict, why = JUDGED.get((code, name, dialogue.id), ("unread", ""))
            verdicts[verdict] += 1
            sample.append({"id": dialogue.id, "path": path, "message": message, "findings": len(found),
                           "verdict": verdict, "why": why, "context": context(dialogue, path)})
        judged = verdicts["true"] + verdicts["false"] + verdicts["derived"]
        share = len(hits) / len(dialogues) if dialogues else 0.0
        out["rules"][code] = {
            "flagged": len(hits), "share": round(share, 4),
            # the share of all records flagged wrongly, if the sample's share of false positives holds
            "wrong_share": round(share * (verdicts["false"] + verdicts["derived"]) / judged, 4) if judged else None,
            "findings": sum(len(found) for _, found in hits),
            "sample": sample, "sample_true": verdicts["true"], "sample_false": verdicts["false"] + verdicts["derived"],
            "sample_unread": verdicts["unread"],
        }
    return out


def report(results: list[dict[str, Any]], show: bool) -> None:
    rows = []
    for result in results:
        for code in CODES:
            r = result["rules"][code]
            wrong = "-" if r["wrong_share"] is None else f"{r['wrong_share']:.1%}"
            rows.append([result["dataset"], code, result["records"], r["flagged"], f"{r['share']:.1%}", r["findings"],
                         f"{r['sample_true']}/{r['sample_false']}/{r['sample_unread']}", wrong])
    print(table(["dataset", "rule", "records", "flagged", "share", "findings", "sample true/false/unread", "wrongly flagged"], rows))
    print()
    print(table(["dataset", "rule layer /s", "without these rules /s"],
                [[r["dataset"], r["rule_layer_per_s"], r["rule_layer_per_s_without"]] for r in results]))
    if not show:
        return
    for result in results:
        for code in CODES:
            for item in result["rules"][code]["sample"]:
                print(f"\n[{result['dataset']}] {code} {item['id']} {item['path']} ({item['findings']} finding(s)) -> {item['verdict']} {item['why']}")
                print(f"  {item['message']}")
                for line in item["context"]:
                    print(f"  {line}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REAL_DATA, help="the papers' released data (ToolBench, ToolAlpaca)")
    parser.add_argument("--bfcl-multi-turn", type=int, default=200, help="entries of BFCL's multi-turn base category (0: none)")
    parser.add_argument("--run", type=Path, help="a run folder <root>/runs/<run_id> whose accepted records to judge too")
    parser.add_argument("--sample", type=int, default=10, help="flagged records drawn per rule and dataset")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="print the table only, not the sampled records")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "semantic_rules.json")
    args = parser.parse_args(argv)
    results = [run(name, dialogues, args.sample, args.seed) for name, dialogues in datasets(args)]
    report(results, not args.quiet)
    unread = sum(r["rules"][code]["sample_unread"] for r in results for code in CODES if not r["dataset"].startswith("run:"))
    print(f"\nsampled findings on released data not judged by hand: {unread}")
    result = {"machine": machine_info(), "codes": {code: RULES[code].severity for code in CODES}, "datasets": results}
    write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
