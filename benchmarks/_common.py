"""Small helpers shared by the benchmarks: machine info, results files, tables."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

RESULTS_DIR = Path(__file__).resolve().parent / "results"
# The papers' released data, for the benchmarks that read it (as in the tests).
REAL_DATA = Path(os.environ.get("TOOLFACTORY_REAL_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")


def require_real_data(*parts: str) -> None:
    """Exit with one message when a benchmark's released data is absent."""
    missing = [part for part in parts if not (REAL_DATA / part).exists()]
    if missing:
        sys.exit(f"this benchmark reads the papers' released data: {', '.join(missing)} not found under {REAL_DATA} "
                 "(set TOOLFACTORY_REAL_DATA to a copy; see the README)")


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "affinity_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
    }
    try:
        info["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["mem_total_mb"] = round(int(line.split()[1]) / 1024)
                break
    except OSError:
        pass
    for module in ("openai", "httpx", "ray", "prefect"):
        try:
            info.setdefault("packages", {})[module] = __import__(module).__version__
        except Exception:  # noqa: BLE001 - informational only
            pass
    return info


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def write_json(path: str | os.PathLike[str], data: dict[str, Any]) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    return out


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain fixed-width table (first column left-aligned, the others right-aligned)."""
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        parts = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        lines.append("  ".join(parts))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if value != value:  # NaN
            return "-"
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return "-" if value is None else str(value)
