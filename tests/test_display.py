"""The progress display: one block of bars redrawn in place on a terminal, with every other line
of the process above it; plain lines when the output is not a terminal.

The terminal tests run a process on a pseudo-terminal and replay everything it wrote in a
terminal emulator (pyte), scrollback included: what a user would find on screen."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import struct
import sys
import termios
import time
from pathlib import Path

import pyte
import pytest

from conftest import small_run_overrides
from flows.display import PlainDisplay, TerminalDisplay, shared_display
from flows.progress import StageProgress
from toolfactory.run.metrics import LLMTotals, ShardMetrics
from toolfactory.stages import STAGE_NAMES

REPO = Path(__file__).resolve().parents[1]
TOOLFACTORY = str(Path(sys.executable).with_name("toolfactory"))
BAR = "━"
PREFECT_LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} \| [A-Z]+ +\| ")


def on_terminal(argv: list[str], env: dict[str, str], columns: int, rows: int, timeout: float) -> tuple[int, list[str]]:
    """Run `argv` on a pseudo-terminal of `columns` x `rows`; its exit status and every line of
    the final screen, scrollback first (trailing blanks removed)."""
    pid, master = pty.fork()
    if pid == 0:  # the child: its stdin, stdout and stderr are the terminal
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        os.execve(argv[0], argv, env)
    screen = pyte.HistoryScreen(columns, rows, history=100_000)
    stream = pyte.ByteStream(screen)
    deadline = time.monotonic() + timeout
    while True:
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            raise TimeoutError(f"{argv[1:3]} did not end in {timeout} s")
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        stream.feed(data)
    os.close(master)
    _, status = os.waitpid(pid, 0)
    rows_seen = [*screen.history.top, *(screen.buffer[y] for y in range(screen.lines))]
    lines = ["".join(row[x].data for x in range(columns)).rstrip() for row in rows_seen]
    while lines and not lines[-1]:
        lines.pop()
    return os.waitstatus_to_exitcode(status), lines


# Three stages at once, as a chain of overlapping stages runs: each logs through Prefect's own
# console handler (set up before the display, as `import prefect` does), prints, and logs through
# a handler created while the display is live on the terminal's stream (as Ray's is, when Ray is
# imported in the middle of a run). Two stages end; the third is still running when the display closes.
STAGES_SCRIPT = """
import logging, sys, threading, time
from prefect.logging.configuration import setup_logging
setup_logging()
from prefect.logging import get_logger
from flows.display import shared_display
from flows.progress import StageProgress
from toolfactory.run.metrics import LLMTotals, ShardMetrics

log = get_logger("display")
metrics = ShardMetrics(attempt_id="a", run_id="r", stage="s", shard=0, started_at="", finished_at="",
                       items_in=3, items_out=2, rejected=1, llm=LLMTotals(calls=5))
with shared_display() as display:
    late = logging.getLogger("late")
    late.addHandler(logging.StreamHandler(sys.__stderr__))
    late.propagate = False

    def stage(name):
        with StageProgress(name, 20, display) as progress:
            for shard in range(20):
                time.sleep(0.03)
                progress.shard_done(metrics)
                log.info("%s shard %02d finished", name, shard)
                print(f"print from {name} {shard:02d}")
                late.warning("late handler: %s %02d", name, shard)

    running = display.add("verify", 20)
    threads = [threading.Thread(target=stage, args=(name,)) for name in ("tasks", "dialogues")]
    for thread in threads:
        thread.start()
    for done in range(1, 13):
        time.sleep(0.05)
        running.update(done, 20, f"verified {done}")
    for thread in threads:
        thread.join()
"""


def test_a_terminal_holds_one_block_of_bars_below_every_log_line_intact() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PREFECT_LOGGING_COLORS": "true", "TERM": "xterm-256color"}
    code, lines = on_terminal([sys.executable, "-c", STAGES_SCRIPT], env, columns=120, rows=24, timeout=120)
    assert code == 0, "\n".join(lines[-30:])
    bars = [line for line in lines if BAR in line]
    assert len(bars) == 1 and bars[0].startswith("verify ") and "12/20 shards" in bars[0], "\n".join(lines)
    assert lines[-1] == bars[0]  # the block is at the bottom, below every log line
    for stage in ("tasks", "dialogues"):
        for shard in range(20):
            found = [line for line in lines if f"{stage} shard {shard:02d} finished" in line]
            assert len(found) == 1, "\n".join(lines)  # the whole screen, to tell a lost line from a garbled one
            [logged] = found
            assert PREFECT_LINE.match(logged) and logged.endswith(f"prefect.display - {stage} shard {shard:02d} finished"), logged
            assert lines.count(f"print from {stage} {shard:02d}") == 1
            assert lines.count(f"late handler: {stage} {shard:02d}") == 1
        [final] = [line for line in lines if line.startswith(f"{stage} ") and "shards in" in line]
        assert re.fullmatch(rf"{stage} +20/20 shards in 0:00:\d\d · in 60 · out 40 · pass 67% · 100 LLM calls", final), final


def test_a_handler_made_during_an_earlier_display_writes_above_the_next_one() -> None:
    # A library configured while the first display was live holds that display's stream.
    script = ("import logging, sys, time\n"
              "from flows.display import shared_display\n"
              "log = logging.getLogger('library')\n"
              "with shared_display():\n"
              "    log.addHandler(logging.StreamHandler(sys.stderr))\n"
              "with shared_display() as display:\n"
              "    line = display.add('curate', 30)\n"
              "    for done in range(1, 31):\n"
              "        line.update(done, 30, 'working')\n"
              "        log.warning('library line %02d', done)\n"
              "        time.sleep(0.02)\n")
    code, lines = on_terminal([sys.executable, "-c", script], {**os.environ, "PYTHONPATH": str(REPO)}, 100, 12, timeout=60)
    assert code == 0, "\n".join(lines)
    assert [line for line in lines if BAR in line] == [lines[-1]]
    assert lines[:-1] == [f"library line {done:02d}" for done in range(1, 31)]


def test_a_stage_that_ends_leaves_one_final_line_and_no_bar() -> None:
    script = ("from flows.display import shared_display\n"
              "from flows.progress import StageProgress\n"
              "from toolfactory.run.metrics import ShardMetrics\n"
              "with shared_display() as display:\n"
              "    for stage in ('measure', 'select', 'curate'):\n"
              "        with StageProgress(stage, 2, display) as progress:\n"
              "            progress.shard_done(None)\n"
              "            progress.shard_done(ShardMetrics(attempt_id='a', run_id='r', stage=stage, shard=1, started_at='',\n"
              "                                             finished_at='', items_in=1, items_out=1))\n")
    code, lines = on_terminal([sys.executable, "-c", script], {**os.environ, "PYTHONPATH": str(REPO)}, 100, 10, timeout=60)
    assert code == 0, "\n".join(lines)
    assert not [line for line in lines if BAR in line]
    assert [line.split()[0] for line in lines] == ["measure", "select", "curate"]
    assert lines[0].endswith("· in 1 · out 1 · pass 100% · 0 LLM calls · 1 failed")


def test_a_process_has_one_display_whoever_opens_it() -> None:
    file = io.StringIO()
    with shared_display(file) as outer, shared_display() as inner:
        assert inner is outer
    with shared_display(file) as later:
        assert later is not outer


def _metrics(items_in: int, items_out: int, rejected: int, calls: int) -> ShardMetrics:
    return ShardMetrics(attempt_id="a", run_id="r", stage="s", shard=0, started_at="", finished_at="", items_in=items_in,
                        items_out=items_out, rejected=rejected, llm=LLMTotals(calls=calls))


def test_off_a_terminal_a_stage_writes_plain_lines_at_most_once_a_minute() -> None:
    now = [0.0]
    file = io.StringIO()
    display = PlainDisplay(file, interval=60, clock=lambda: now[0])
    metrics = _metrics(items_in=4, items_out=3, rejected=1, calls=2)
    with StageProgress("dialogues", 5, display) as progress:
        for now[0] in (10.0, 61.0, 70.0, 100.0):  # a shard ends at each of these times
            progress.shard_done(metrics)
        progress.not_started()
        now[0] = 130.0
    assert file.getvalue().splitlines() == [
        "dialogues  2/5 shards so far (0:01:01) · in 8 · out 6 · pass 75% · 4 LLM calls",
        "dialogues  4/4 shards in 0:02:10 · in 16 · out 12 · pass 75% · 8 LLM calls",
    ]


def test_a_pipe_gets_whole_lines_and_no_control_characters() -> None:
    read, write = os.pipe()
    with os.fdopen(write, "w") as pipe:
        with shared_display(pipe) as display:
            assert isinstance(display, PlainDisplay) and not isinstance(display, TerminalDisplay)
            with StageProgress("verify", 1, display) as progress:
                progress.shard_done(_metrics(items_in=2, items_out=1, rejected=1, calls=3))
    with os.fdopen(read) as output:
        text = output.read()
    assert re.fullmatch(r"verify +1/1 shards in 0:00:00 · in 2 · out 1 · pass 50% · 3 LLM calls\n", text), text


@pytest.mark.e2e
def test_the_cli_on_a_terminal_leaves_no_stale_bars_and_whole_log_lines(prefect_api: str, ray_head: str, tmp_path: Path) -> None:
    overrides = [arg for value in small_run_overrides(tmp_path / "data") for arg in ("--set", value)]
    env = {**os.environ, "PREFECT_API_URL": prefect_api, "RAY_ADDRESS": ray_head, "PYTHONPATH": str(REPO), "TERM": "xterm-256color"}
    code, lines = on_terminal([TOOLFACTORY, "run", *overrides], env, columns=400, rows=40, timeout=600)
    assert code == 0, "\n".join(lines[-40:])
    assert not [line for line in lines if BAR in line or "ETA" in line], "\n".join(lines)
    logged = [line for line in lines if PREFECT_LINE.match(line)]
    assert any(" shard 0: " in line for line in logged)  # the per-shard log lines are there, whole
    header = next(i for i, line in enumerate(lines) if line.startswith("stage ") and "shards" in line)
    summarized = [match[1] for line in lines[header + 1:] if (match := re.match(r"(\w+) +\d+ +\d+ +\d+ +\d+ ", line))]
    assert summarized, "\n".join(lines[header:])
    for stage in STAGE_NAMES:  # a stage that ran left one final line, whichever group it ran in
        finals = [line for line in lines if re.match(rf"{stage} +\d+/\d+ shards in \d+:\d\d:\d\d · in ", line)]
        assert len(finals) == 1 if stage in summarized else len(finals) <= 1, (stage, finals)
