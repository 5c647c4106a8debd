from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from toolfactory.stats import StatsDB


def test_a_reader_waits_while_another_process_writes(tmp_path: Path) -> None:
    db = StatsDB(tmp_path / "stats.duckdb")
    db.start_run("r1", "2026-01-01", "/data", {}, {}, "2026-01-01T00:00:00")
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb, time\ncon = duckdb.connect({str(db.path)!r})\nprint('held', flush=True)\ntime.sleep(1.0)\ncon.close()"],
        stdout=subprocess.PIPE, text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    started = time.monotonic()
    assert db.latest_run_id() == "r1"  # would raise "Could not set lock" without waiting
    assert holder.wait(10) == 0
    assert time.monotonic() - started > 0.3
