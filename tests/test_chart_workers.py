"""Charts drawn by worker processes while the report goes on (report/charts.py ``_Drawer``,
report/chart_draw.py): real vl-convert in real child processes.

What a worker draws is what this process draws; a worker that cannot start or dies leaves its
charts to this process; a script without a ``__main__`` guard is never imported again by a worker.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from cardproof.report import charts
from cardproof.report.i18n import Lang

from test_chart_legends import _rows


def _draw(folder, workers: int) -> dict[str, str]:
    """Six charts (two languages, three row sets), one path asked for twice (the last chart counts); none
    written from what this process drew before, so each is really drawn here or by a worker."""
    folder.mkdir(parents=True, exist_ok=True)
    charts._DRAWN.clear()
    with charts.deferred(workers=workers):
        for i, rows in enumerate([_rows(), _rows()[:2], _rows()[1:]]):
            for lang in ("en", "de"):
                charts.write_svg(folder / f"c{i}-{lang}.svg", charts.decode_chart(rows, Lang(lang), title=f"T{i}"))
        charts.write_svg(folder / "c0-en.svg", charts.decode_chart(_rows()[:3], Lang("en"), title="again"))
    return {f.name: f.read_text() for f in sorted(folder.glob("*.svg"))}


def test_a_few_charts_are_drawn_here_and_more_go_to_workers(tmp_path, monkeypatch):
    """Six charts are fewer than a block draws itself: no worker starts for them; with room for two
    here, the other four go to a worker and all six are what this process alone draws."""
    started = []
    real = subprocess.Popen
    monkeypatch.setattr(charts.subprocess, "Popen", lambda *a, **k: started.append(a[0]) or real(*a, **k))
    here = _draw(tmp_path / "here", workers=1)
    assert _draw(tmp_path / "few", workers=2) == here and started == []
    monkeypatch.setattr(charts._Drawer, "LOCAL", 2)
    assert _draw(tmp_path / "more", workers=2) == here and len(started) == 1


def test_workers_draw_what_this_process_draws(tmp_path, monkeypatch):
    started = []
    real = subprocess.Popen
    monkeypatch.setattr(charts.subprocess, "Popen", lambda *a, **k: started.append(a[0]) or real(*a, **k))
    here = _draw(tmp_path / "here", workers=1)
    assert started == []
    monkeypatch.setattr(charts._Drawer, "LOCAL", 0)  # every chart to a worker
    drawn = _draw(tmp_path / "workers", workers=2)
    assert started and all("cardproof.report.chart_draw" in cmd for cmd in started)
    assert drawn == here and len(drawn) == 6
    assert ">again<" in drawn["c0-en.svg"] and all(t.rstrip().endswith("-->") for t in drawn.values())


def test_a_worker_that_cannot_start_or_dies_leaves_its_charts_to_this_process(tmp_path, monkeypatch):
    here = _draw(tmp_path / "here", workers=1)
    monkeypatch.setattr(charts._Drawer, "LOCAL", 0)
    monkeypatch.setattr(charts.sys, "executable", str(tmp_path / "no-such-python"))
    assert _draw(tmp_path / "none", workers=2) == here
    monkeypatch.setattr(charts.sys, "executable", "/bin/true")  # starts, reads nothing, exits at once
    assert _draw(tmp_path / "dead", workers=2) == here


def test_a_script_without_a_main_guard_is_not_run_again_by_the_workers(tmp_path):
    script = tmp_path / "unguarded.py"
    marker = tmp_path / "runs.txt"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path.parent)!r})
        from pathlib import Path
        from cardproof.report import charts
        from cardproof.report.i18n import Lang
        with open({str(marker)!r}, "a") as f:
            f.write("run\\n")
        rows = [{{"model": "m", "class": "short", "median": 10.0, "low": 9.0, "high": 11.0, "n": 3, "cell": 1,
                 "unstable": False, "stability": "stable"}}]
        charts._Drawer.LOCAL = 0  # the one chart goes to a worker
        with charts.deferred(workers=2):
            charts.write_svg(Path({str(tmp_path / "c.svg")!r}), charts.decode_chart(rows, Lang("en"), title="T"))
    """))
    subprocess.run([sys.executable, str(script)], check=True, timeout=120)
    assert marker.read_text() == "run\n"  # the script ran once: no worker imported it again
    assert (tmp_path / "c.svg").read_text().startswith("<svg")
