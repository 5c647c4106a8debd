"""The verifier's report files, byte for byte, from two versions of the code.

    python -m benchmarks.same_reports --before DIR [--records N] [--data DIR] [--workers 1,2]

`DIR` is another checkout of the project (``git worktree add /tmp/before HEAD~3``, or ``git archive
<commit> toolfactory | tar -x -C /tmp/before``). Every corpus is verified by ``toolfactory.cli verify``
under each version (``PYTHONPATH`` set to that tree) with every ``--workers`` count, and the report
files (``report.json``, ``report.md``, ``rejected.jsonl``, ``format_errors.jsonl``) are compared byte for
byte. The corpora: the speed benchmark's xLAM corpora (APIs recur, every API new), the same records
with broken parameter schemas and invalid calls, the labelled corpus (validity only, and with the
``toolace`` policy) and the released data under ``--data`` (ToolBench, ToolAlpaca). A speed-up that
changes one verdict shows here. Exits 1 when any file differs.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks import xlam_corpus
from benchmarks.real_data import SHARED_DATA

FILES = ("report.json", "report.md", "rejected.jsonl", "format_errors.jsonl")
HERE = Path(__file__).resolve().parents[1]


def broken(source: Path, target: Path, seed: int = 7) -> Path:
    """The records of `source` with a share of broken parameter schemas and invalid calls."""
    rng = random.Random(seed)
    out = []
    for line in source.read_text().splitlines():
        record = json.loads(line)
        tools, answers = json.loads(record["tools"]), json.loads(record["answers"])
        roll = rng.random()
        if roll < 0.1 and tools:
            name = next(iter(tools[0]["parameters"]), None)
            if name:
                tools[0]["parameters"][name]["type"] = rng.choice(["strin", "List[", "Dict[str]", "int, optional, maybe"])
        elif roll < 0.2 and answers:
            answers[0]["arguments"] = {**answers[0]["arguments"], "undeclared": 1}
        elif roll < 0.3 and answers:
            answers[0]["arguments"] = {key: [value] for key, value in answers[0]["arguments"].items()}
        elif roll < 0.35 and answers:
            answers[0]["arguments"] = {}
        out.append(json.dumps({**record, "tools": json.dumps(tools), "answers": json.dumps(answers)}))
    target.write_text("\n".join(out) + "\n")
    return target


def corpora(work: Path, n: int, data: Path) -> list[tuple[str, Path, str, list[str]]]:
    recurring = xlam_corpus.write(work / "recurring.jsonl", n)
    new = xlam_corpus.write(work / "new-apis.jsonl", n, seed=11, apis=None)
    out = [("xlam-recurring", recurring, "xlam", []), ("xlam-new-apis", new, "xlam", []),
           ("xlam-broken", broken(new, work / "broken.jsonl"), "xlam", [])]
    labelled = work / "labelled.jsonl"
    subprocess.run([sys.executable, "-c", _LABELLED, str(labelled)], check=True, env={**os.environ, "PYTHONPATH": str(HERE)})
    out += [("labelled", labelled, "toolfactory", []), ("labelled-toolace", labelled, "toolfactory", ["--policy", "toolace"])]
    if (data / "toolbench").is_dir():
        out.append(("toolbench", data / "toolbench/answer/G1_answer", "toolbench", []))
    if (data / "toolalpaca").is_dir():
        out.append(("toolalpaca", data / "toolalpaca/eval_simulated.json", "toolalpaca", []))
    return out


# The labelled corpus (valid dialogues and their corruptions) as toolfactory JSONL.
_LABELLED = """
import json, sys
from benchmarks.corpus import valid_dialogues
from toolfactory.stages.verify.corruption import corruptions
valid = valid_dialogues(80, seed=3)
dialogues = [*valid, *(c.dialogue for d in valid for c in corruptions(d, seed=3))]
with open(sys.argv[1], "w") as out:
    for d in dialogues:
        out.write(json.dumps(d.model_dump()) + "\\n")  # escaped: the corruptions hold lone surrogates
"""


def verify(tree: Path, path: Path, fmt: str, extra: list[str], out: Path, workers: int) -> None:
    command = [sys.executable, "-m", "toolfactory.cli", "verify", str(path), "--format", fmt, "--out", str(out),
               "--workers", str(workers), *extra]
    subprocess.run(command, env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree, capture_output=True, check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the other version's source tree")
    parser.add_argument("--records", type=int, default=4000)
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--workers", default="1,2")
    args = parser.parse_args(argv)
    differing = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, path, fmt, extra in corpora(work, args.records, args.data):
            for workers in (int(w) for w in args.workers.split(",")):
                outs = {}
                for label, tree in (("before", args.before.resolve()), ("after", HERE)):
                    outs[label] = work / f"{name}-{workers}-{label}"
                    verify(tree, path, fmt, extra, outs[label], workers)
                same = [f for f in FILES if (outs["before"] / f).exists() == (outs["after"] / f).exists()
                        and (not (outs["before"] / f).exists() or filecmp.cmp(outs["before"] / f, outs["after"] / f, shallow=False))]
                report = outs["after"] / "report.json"
                summary = json.loads(report.read_text()) if report.exists() else {}
                status = "same" if len(same) == len(FILES) and report.exists() else "DIFFERENT"
                differing += status != "same"
                print(f"{name:<18} --workers {workers}: {status} ({summary.get('records', '?')} records, "
                      f"{summary.get('rejected', '?')} rejected; differing: {sorted(set(FILES) - set(same)) or '-'})")
    print(f"\n{differing} corpus runs differ")
    return 1 if differing else 0


if __name__ == "__main__":
    raise SystemExit(main())
