"""Charts render headless and offline, whatever their labels hold."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

from toolfactory.report import charts

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"



def test_charts_render_in_a_fresh_process_without_a_display() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MPLBACKEND")}
    code = (
        "import matplotlib, sys\n"
        "from toolfactory.report import charts\n"
        "chart = charts.bars({'a': 3, 'b': 1}, 'x.png', 'title', 'panel')\n"
        "sys.stdout.write(matplotlib.get_backend().lower() + ' ' + chart.png[:8].hex())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout == "agg " + PNG_MAGIC.hex()


def test_labels_are_plain_text_and_missing_glyphs_do_not_warn() -> None:
    labels = {"$5 plan for $10": 3, "天气查询": 2, "x" * 200: 1}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        chart = charts.bars(labels, "labels.png", "Labels", "odd labels")
    assert chart.png.startswith(PNG_MAGIC)
    assert "$5 plan for $10 3" in chart.alt


def test_long_lists_keep_the_largest_and_sum_the_rest() -> None:
    counts = {f"reason-{k:02d}": k + 1 for k in range(30)}
    kept = charts.top(counts, 10)
    assert len(kept) == 10 and kept[0] == ("reason-29", 30)
    assert kept[-1] == ("21 others", sum(range(1, 22)))
    assert charts.short("y" * 100).endswith("…") and len(charts.short("y" * 100)) == charts.LABEL_CHARS


def test_histogram_of_integers_and_of_fractions() -> None:
    for values in ({1.0: 3, 2.0: 5, 4.0: 1}, {0.125: 2, 0.5: 7, 0.875: 1}, {3.0: 4}):
        chart = charts.histogram(values, "h.png", "Histogram", "complexity")
        assert chart.png.startswith(PNG_MAGIC) and f"{sum(values.values())} records" in chart.alt
