"""The trend step's fast parts: numbers as ``Lang.num`` writes them, charts drawn as SVG directly, a
bounded bootstrap; and the trend step stays linear (generated database, real SQLite, real templates)."""

from __future__ import annotations

import random
import time
import xml.dom.minidom

from cardproof.daemon.store import open_store
from cardproof.report.history import steps
from cardproof.report.history.numbers import formatter
from cardproof.report.history.render import write_trends
from cardproof.report.history.svg import nice_ticks, trend_svg
from cardproof.report.i18n import Lang
from history_data import make_db


def test_numbers_read_as_lang_num_writes_them():
    rng = random.Random(3)
    values = ([rng.uniform(-1e6, 1e6) for _ in range(3000)] + [round(rng.uniform(0, 100), rng.randint(0, 4))
                                                                for _ in range(3000)]
              + [2.675, 0.125, 0.05, -0.04, 0.0, -0.0, 1e15, 1e-7, 5, 123456789, float("nan"), float("inf"), None])
    for code in ("en", "de"):
        L, num = Lang(code), formatter(Lang(code))
        for v in values:
            for digits in (0, 1, 2):
                assert num(v, digits) == L.num(v, digits), (code, v, digits)


def _row(day, median, usable=True, state="usable", cell="short · reasoning off", date=None):
    return {"date": date or f"2026-06-{day:02d}T02:00:00+00:00", "median": median, "low": median * 0.98,
            "high": median * 1.02, "n": 5, "run": day, "cell": cell, "usable": usable, "state": state}


def test_chart_is_wellformed_svg_with_hollow_unusable_points_and_changes():
    rows = [_row(d, 1000 + d) for d in range(1, 11)] + [_row(11, 900, False, "killed")]
    rows += [_row(12, 5, date="not a date"), _row(13, float("nan"))]  # damaged: left out, not fatal
    svg = trend_svg(rows, [{"date": "2026-06-05T02:00:00+00:00"}, {"date": None}], Lang("de"),
                    "decode · <img src=x>", "decode tok/s")
    doc = xml.dom.minidom.parseString(svg)  # well-formed: the title's markup is text
    assert "<img" not in svg and "&lt;img src=x&gt;" in svg
    assert len(doc.getElementsByTagName("polyline")) == 1
    # one dashed rule for the change; the killed run hollow and grey with its state in the legend
    assert sum(1 for e in doc.getElementsByTagName("line") if e.getAttribute("stroke-dasharray")) == 1
    assert any(e.getAttribute("fill") == "white" and e.getAttribute("stroke") == "#888888"
               for e in doc.getElementsByTagName("rect"))
    assert ">killed<" in svg
    assert "1.000" in svg and "Datum des Laufs" in svg  # German axis numbers and title


def test_chart_without_a_drawable_point_says_so():
    svg = trend_svg([_row(1, 1.0) | {"median": None}], [], Lang("en"), "t", "a")
    assert svg.startswith("<svg") and "—" in svg
    xml.dom.minidom.parseString(svg)


def test_ticks_cover_the_values():
    for lo, hi in [(0.3, 0.31), (980, 1130), (5, 5), (-3, 7), (12345, 99999)]:
        t = nice_ticks(lo, hi)
        assert t[0] <= lo and t[-1] >= hi and len(t) <= 12


def test_bootstrap_runs_only_at_candidates_beyond_the_noise(monkeypatch):
    """Pure noise over many runs: the bootstrap (the step's costly part) is not run at every split."""
    calls = []
    real = steps.judge
    monkeypatch.setattr(steps, "judge", lambda *a, **k: calls.append(1) or real(*a, **k))
    rng = random.Random(5)
    points = [[100 * rng.uniform(0.7, 1.3) for _ in range(5)] for _ in range(300)]
    assert steps.find_steps(points, 0.05, "noise") == []
    assert len(calls) <= 2


def test_trend_step_grows_linearly_with_runs(tmp_path):
    """Four times the runs take at most about five times as long (a quadratic step would take 16x)."""
    def timed(n):
        db = tmp_path / f"{n}.db"
        make_db(db, [{"level": 100.0, "build": f"b{i // 10}"} for i in range(n)], classes=("short", "long"))
        store = open_store(db, mode="ro")
        try:
            best = None
            for _ in range(2):
                t = time.perf_counter()
                write_trends(store.db, tmp_path / f"p{n}-{_}")
                best = min(best or 1e9, time.perf_counter() - t)
            return best
        finally:
            store.close()

    small, large = timed(60), timed(240)
    assert large < 5.5 * small + 0.5, (small, large)


def test_a_year_of_runs_is_drawn_with_the_latest_in_full_and_older_ones_binned():
    from datetime import datetime, timedelta, timezone
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    rows = [_row(1, 100.0 + (i % 7), date=(t0 + timedelta(days=i)).isoformat()) | {"run": i + 1}
            for i in range(1000)]
    rows[10] = rows[10] | {"usable": False, "state": "killed"}  # an old unusable run stays its own mark
    svg = trend_svg(rows, [], Lang("en"), "t", "a")
    doc = xml.dom.minidom.parseString(svg)
    marks = doc.getElementsByTagName("circle")
    assert 300 < len(marks) - 1 <= 420  # 200 latest + about 200 bins (one circle is the legend's)
    assert len(doc.getElementsByTagName("polyline")[0].getAttribute("points").split()) == len(marks) - 1
    assert any(e.getAttribute("stroke") == "#888888" for e in doc.getElementsByTagName("rect"))
