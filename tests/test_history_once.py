"""The series are computed once per report build and shared by the trend pages and the run articles' leads."""

from __future__ import annotations

from cardproof.report import build as build_module
from cardproof.report.history import series
from history_data import make_db


def test_one_build_computes_the_series_once(tmp_path, monkeypatch):
    ids = make_db(tmp_path / "h.db", [{"level": 100.0, "build": "b1"}] * 5 + [{"level": 88.0, "build": "b2"}] * 3)
    calls = []
    real = series.model_conditions  # read once per build_series, looked up at call time

    def counted(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(series, "model_conditions", counted)
    build_module.build(tmp_path / "h.db", tmp_path / "proj", run_mkdocs=False)
    assert len(calls) == 1
    # and both consumers saw it: the lead of the run that starts the step and its trend page
    site = tmp_path / "proj" / "site"
    assert "This run starts a step" in (site / "runs" / f"run-{ids[5]}.md").read_text()
    assert "(../runs/run-%d.md)" % ids[5] in (site / "trends" / "trend-nightly-tiny-a.md").read_text()
