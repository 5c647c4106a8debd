"""PNG charts of a run's report, drawn with matplotlib's Agg canvas: headless, offline.

Each function takes plain numbers and returns a :class:`Chart` (its file name, title, alt text
and PNG bytes). No pyplot: figures are built and rendered explicitly, so no global figure state
is kept and no display is ever looked for. Labels come from data and are drawn as plain text
(no mathtext, so a ``$`` is a dollar sign); glyphs the bundled font lacks (e.g. CJK) are drawn as
boxes instead of warning.
"""

from __future__ import annotations

import io
import os
import tempfile
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Sequence


def _writable(folder: Path) -> bool:
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    return existing is not None and os.access(existing, os.W_OK)


def _headless_matplotlib() -> None:
    """Agg unless the user chose otherwise, and a temporary config/cache folder when matplotlib's
    default ones (under the home folder) cannot be written, e.g. on a read-only worker image."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    if "MPLCONFIGDIR" in os.environ:
        return
    home = Path.home()
    config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / "matplotlib"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or home / ".cache") / "matplotlib"
    if not (_writable(config) and _writable(cache)):
        os.environ["MPLCONFIGDIR"] = tempfile.mkdtemp(prefix="toolfactory-matplotlib-")


_headless_matplotlib()

import matplotlib  # noqa: E402  (configured above)
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

IN, OUT, EXTRA = "#9aa5b1", "#2b6cb0", "#dd6b20"  # items in / accepted / second series
LABEL_CHARS = 38  # longer data labels are cut on charts (tables show them whole)
TOP_N = 25  # bars per panel at most
TOP_REASONS = 10  # rejection reasons per stage at most


@dataclass(frozen=True)
class Chart:
    file: str  # file name next to index.html
    title: str
    alt: str  # what the chart shows, for readers without images
    png: bytes


def short(label: str, limit: int = LABEL_CHARS) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


@contextmanager
def _figure(width: float, height: float) -> Iterator[Figure]:
    with matplotlib.rc_context({"text.parse_math": False, "font.size": 9, "axes.spines.top": False,
                                "axes.spines.right": False}), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*[Gg]lyph .* missing from")
        figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
        FigureCanvasAgg(figure)
        yield figure


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _render(file: str, title: str, alt: str, figure: Figure) -> Chart:
    figure.suptitle(title, fontsize=11)
    return Chart(file, title, alt, _png(figure))


def top(counts: Mapping[str, int], n: int) -> list[tuple[str, int]]:
    """The `n` largest counts, largest first; past `n`, the rest summed as one "k others" item."""
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if len(items) <= n:
        return items
    rest = items[n - 1 :]
    return items[: n - 1] + [(f"{len(rest)} others", sum(v for _, v in rest))]


def _hbars(ax: Axes, counts: Mapping[str, int], title: str, color: str = OUT, limit: int = TOP_N) -> None:
    """Horizontal bars, largest on top, at most `limit` (see :func:`top`)."""
    items = top(counts, limit)
    labels = [short(k) for k, _ in items][::-1]
    values = [v for _, v in items][::-1]
    bars = ax.barh(range(len(values)), values, height=0.7, color=color)
    ax.set_yticks(range(len(values)), labels)
    spare = max(len(values), 3) - len(values)  # bars as thick with one value as with many
    ax.set_ylim(-0.6 - spare / 2, len(values) - 0.4 + spare / 2)
    ax.bar_label(bars, labels=[_number(v) for v in values], padding=2, fontsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title, fontsize=10)
    ax.margins(x=0.15)


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 100 else f"{value:,.2f}"


def _rows(n: int, limit: int = TOP_N) -> float:
    return 0.7 + 0.24 * max(min(n, limit), 3)


def funnel(stages: Sequence[tuple[str, int, int, float | None]]) -> Chart:
    """`stages`: (label, items in, items out, pass rate) in run order, verify's layers included.
    The rate is given, not derived: a stage that expands (one tool, many tasks) has more out than in."""
    with _figure(max(6.0, 1.1 * len(stages) + 2), 4.2) as figure:
        ax = figure.add_subplot()
        x = range(len(stages))
        ax.bar([i - 0.2 for i in x], [s[1] for s in stages], 0.4, label="in", color=IN)
        bars = ax.bar([i + 0.2 for i in x], [s[2] for s in stages], 0.4, label="out / passed", color=OUT)
        rates = ["-" if s[3] is None else f"{s[3]:.0%}" for s in stages]
        ax.bar_label(bars, labels=rates, padding=2, fontsize=8)
        ax.set_xticks(list(x), [short(s[0], 18) for s in stages], rotation=20, ha="right")
        ax.set_ylabel("records (labels: pass rate)")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(frameon=False)
        alt = "; ".join(f"{s[0]}: {s[1]} in, {s[2]} out" for s in stages)
        return _render("funnel.png", "Records in and out per stage", alt, figure)


def rejections(by_stage: Mapping[str, Mapping[str, int]]) -> Chart:
    """Rejection reasons per stage (stages with rejections only), most frequent first."""
    stages = [(stage, reasons) for stage, reasons in by_stage.items() if reasons]
    heights = [_rows(len(reasons), TOP_REASONS) for _, reasons in stages]
    with _figure(8.0, sum(heights) + 0.5) as figure:
        axes = figure.subplots(len(stages), 1, squeeze=False, height_ratios=heights)[:, 0]
        for ax, (stage, reasons) in zip(axes, stages):
            _hbars(ax, reasons, stage, EXTRA, TOP_REASONS)
        alt = "; ".join(f"{stage}: " + ", ".join(f"{r} {n}" for r, n in top(reasons, TOP_REASONS)) for stage, reasons in stages)
        return _render("rejections.png", "Rejection reasons per stage (records; a record may have several)", alt, figure)


def mix(panels: Mapping[str, Mapping[str, int]], file: str, title: str) -> Chart:
    """One horizontal bar panel per dimension (e.g. modes, recipes), side by side."""
    height = max(_rows(len(counts)) for counts in panels.values()) + 0.5
    with _figure(5.0 * len(panels), height) as figure:
        axes = figure.subplots(1, len(panels), squeeze=False)[0]
        for ax, (name, counts) in zip(axes, panels.items()):
            _hbars(ax, counts, name)
        alt = "; ".join(f"{name}: " + ", ".join(f"{k} {v}" for k, v in top(counts, TOP_N)) for name, counts in panels.items())
        return _render(file, title, alt, figure)


def target_vs_shown(pairs: Mapping[tuple[str, str], int]) -> Chart:
    """Records per (target mode, shown mode): the diagonal is the task's mode kept."""
    targets = shown = sorted({mode for pair in pairs for mode in pair})  # same order: a diagonal
    grid = [[pairs.get((t, s), 0) for s in shown] for t in targets]
    with _figure(max(5.0, 1.0 * len(shown) + 2.5), max(3.0, 0.5 * len(targets) + 1.8)) as figure:
        ax = figure.add_subplot()
        image = ax.imshow(grid, cmap="Blues", aspect="auto")
        ax.set_xticks(range(len(shown)), [short(s, 18) for s in shown], rotation=20, ha="right")
        ax.set_yticks(range(len(targets)), [short(t, 18) for t in targets])
        ax.set_xlabel("mode the dialogue shows")
        ax.set_ylabel("mode the task asked for")
        peak = max(max(row) for row in grid) or 1
        for i, row in enumerate(grid):
            for j, n in enumerate(row):
                ax.text(j, i, f"{n:,}", ha="center", va="center", fontsize=8,
                        color="white" if n > peak / 2 else "black")
        figure.colorbar(image, ax=ax, label="records")
        alt = "; ".join(f"asked {t}, shows {s}: {n}" for (t, s), n in sorted(pairs.items()))
        return _render("target_vs_shown.png", "Target mode vs shown mode", alt, figure)


def histogram(values: Mapping[float, int], file: str, title: str, xlabel: str) -> Chart:
    """A histogram of counted values; integer values get one bin each when they span few."""
    xs = sorted(values)
    weights = [values[x] for x in xs]
    low, high = xs[0], xs[-1]
    if all(x.is_integer() for x in xs) and high - low <= 40:
        bins: int | list[float] = [low - 0.5 + k for k in range(int(high - low) + 2)]
    else:
        bins = min(30, max(len(xs), 1))
    with _figure(7.0, 3.6) as figure:
        ax = figure.add_subplot()
        ax.hist(xs, bins=bins, weights=weights, color=OUT, edgecolor="white")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("records")
        total = sum(weights)
        mean = sum(x * w for x, w in zip(xs, weights)) / total
        alt = f"{total} records, {xlabel} from {_number(low)} to {_number(high)}, mean {mean:.2f}"
        return _render(file, title, alt, figure)


def bars(counts: Mapping[str, int], file: str, title: str, panel: str) -> Chart:
    """One panel of horizontal bars (domains, clusters)."""
    with _figure(7.5, _rows(len(counts)) + 0.5) as figure:
        _hbars(figure.add_subplot(), counts, panel)
        alt = ", ".join(f"{k} {v}" for k, v in top(counts, TOP_N))
        return _render(file, title, alt, figure)


def coverage(groups: Mapping[str, Sequence[tuple[str, int]]]) -> Chart:
    """Per group (tools, APIs): the pool's size first, then how many distinct ones each use saw."""
    colors = (IN, OUT, EXTRA, "#38a169")
    with _figure(4.2 * len(groups) + 0.5, 3.6) as figure:
        axes = figure.subplots(1, len(groups), squeeze=False)[0]
        for ax, (name, series) in zip(axes, groups.items()):
            pool = series[0][1]
            values = [n for _, n in series]
            drawn = ax.bar(range(len(series)), values, color=colors[: len(series)])
            shares = [f"{n:,}" if k == 0 or not pool else f"{n:,} ({n / pool:.0%})" for k, n in enumerate(values)]
            ax.bar_label(drawn, labels=shares, padding=2, fontsize=8)
            ax.set_xticks(range(len(series)), [label for label, _ in series], rotation=15, ha="right")
            ax.set_title(name, fontsize=10)
            ax.margins(y=0.15)
        alt = "; ".join(f"{name}: " + ", ".join(f"{label} {n}" for label, n in series) for name, series in groups.items())
        return _render("coverage.png", "Coverage of the tool pool", alt, figure)


def llm_use(rows: Sequence[tuple[str, float, float, float, float]], file: str, title: str, per: str) -> Chart:
    """`rows`: (name, calls, cache hits, prompt tokens, completion tokens), each already divided
    as `per` says (e.g. "per accepted record")."""
    with _figure(max(8.0, 1.4 * len(rows) + 3), 3.8) as figure:
        left, right = figure.subplots(1, 2)
        x = range(len(rows))
        names = [short(r[0], 18) for r in rows]
        left.bar([i - 0.2 for i in x], [r[1] for r in rows], 0.4, label="calls", color=OUT)
        left.bar([i + 0.2 for i in x], [r[2] for r in rows], 0.4, label="cache hits", color=IN)
        left.set_xticks(list(x), names, rotation=20, ha="right")
        left.set_title(f"requests {per}", fontsize=10)
        left.legend(frameon=False)
        right.bar(x, [r[3] for r in rows], label="prompt", color=OUT)
        stacked = right.bar(x, [r[4] for r in rows], bottom=[r[3] for r in rows], label="completion", color=EXTRA)
        right.bar_label(stacked, labels=[_number(r[3] + r[4]) for r in rows], padding=2, fontsize=8)
        right.set_xticks(list(x), names, rotation=20, ha="right")
        right.set_title(f"tokens {per}", fontsize=10)
        right.legend(frameon=False)
        right.margins(y=0.15)
        alt = "; ".join(f"{r[0]}: {r[1]:.2f} calls, {r[2]:.2f} cache hits, {r[3] + r[4]:.1f} tokens {per}" for r in rows)
        return _render(file, title, alt, figure)


def trend(points: Sequence[tuple[str, int, int]]) -> Chart:
    """`points`: (run id, accepted records, tokens) per run, oldest first, this run last."""
    with _figure(max(6.0, 0.9 * len(points) + 2), 3.6) as figure:
        left, right = figure.subplots(1, 2)
        x = list(range(len(points)))
        names = [short(p[0], 22) for p in points]
        for ax, values, label, color in ((left, [p[1] for p in points], "accepted records", OUT),
                                         (right, [p[2] for p in points], "tokens", EXTRA)):
            ax.plot(x, values, marker="o", color=color)
            ax.set_xticks(x, names, rotation=25, ha="right")
            ax.set_title(label, fontsize=10)
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            ax.margins(y=0.2)
        alt = "; ".join(f"{p[0]}: {p[1]} accepted, {p[2]} tokens" for p in points)
        return _render("trend.png", "This run against the earlier runs of the root", alt, figure)
