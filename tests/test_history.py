"""Series across runs and the steps found in them, on generated databases with known levels (real SQLite)."""

from __future__ import annotations

import pytest

from cardproof.daemon.store import open_store
from cardproof.report.history import build_series
from cardproof.report.history.steps import find_steps
from history_data import make_db


def _series(path, **kw):
    store = open_store(path, mode="ro")
    try:
        return build_series(store.db, **kw)
    finally:
        store.close()


def _decode_steps(series):
    return [s for s in series["steps"] if s["metric"] == "decode_tps"]


def test_known_step_at_a_build_change_is_found_there_with_its_size_inside_the_interval(tmp_path):
    runs = [{"level": 100.0, "build": "b7342"}] * 8 + [{"level": 88.0, "build": "b7401"}] * 7
    ids = make_db(tmp_path / "h.db", runs)
    [series] = _series(tmp_path / "h.db")
    assert [p["run_id"] for p in series["points"]] == ids
    [step] = _decode_steps(series)
    assert step["before"]["run_id"] == ids[7] and step["after"]["run_id"] == ids[8]
    assert step["low"] <= -0.12 <= step["high"] and step["high"] < 0
    assert step["regression"] and step["stayed"] == 7
    assert ("server build", "b7342", "b7401") in step["changes"]
    # the canary sample (1 tok/s) never entered a point
    assert min(v for p in series["points"] for v in p["values"]["decode_tps"]) > 80


@pytest.mark.parametrize("seed", range(6))
def test_pure_noise_gives_no_step(tmp_path, seed):
    make_db(tmp_path / "n.db", [{"level": 50.0, "noise": 0.06}] * 20, seed=seed)
    [series] = _series(tmp_path / "n.db")
    assert series["steps"] == []


def test_a_condition_change_without_effect_is_marked_and_no_step(tmp_path):
    runs = [{"level": 70.0, "build": "b1", "kv": "f16"}] * 5 + [{"level": 70.0, "build": "b2", "kv": "q8_0"}] * 5
    ids = make_db(tmp_path / "c.db", runs)
    [series] = _series(tmp_path / "c.db")
    assert series["steps"] == []
    marked = {p["run_id"]: p["changes"] for p in series["points"] if p["changes"]}
    assert list(marked) == [ids[5]]
    assert ("server build", "b1", "b2") in marked[ids[5]] and ("KV cache type K", "f16", "q8_0") in marked[ids[5]]


def test_interrupted_runs_and_unstable_cells_are_shown_but_never_start_or_end_a_step(tmp_path):
    runs = ([{"level": 100.0}] * 5
            + [{"level": 60.0, "status": "interrupted"}, {"level": 80.0, "values": [40.0, 80.0, 120.0]}]
            + [{"level": 85.0}] * 5)
    ids = make_db(tmp_path / "i.db", runs)
    [series] = _series(tmp_path / "i.db")
    states = {p["run_id"]: p["state"] for p in series["points"]}
    assert states[ids[5]] == "interrupted" and states[ids[6]] == "unstable"
    [step] = _decode_steps(series)
    assert step["before"]["run_id"] == ids[4] and step["after"]["run_id"] == ids[7]
    assert step["skipped"] == [ids[5], ids[6]]


def test_a_step_smaller_than_the_campaigns_minimum_effect_is_not_claimed(tmp_path):
    runs = [{"level": 100.0, "noise": 0.005}] * 6 + [{"level": 96.0, "noise": 0.005}] * 6
    make_db(tmp_path / "a.db", runs)
    assert _decode_steps(_series(tmp_path / "a.db")[0]) == []  # 4 % < default 5 %
    make_db(tmp_path / "b.db", runs, extra="[report]\nmin_effect_pct = 2\n")
    [step] = _decode_steps(_series(tmp_path / "b.db")[0])
    assert step["low"] <= -0.04 <= step["high"]


def test_two_runs_with_overlapping_samples_claim_nothing():
    """Two runs whose samples overlap: the medians differ by 10 % but the samples do not support a step."""
    assert find_steps([[90.0, 100.0, 110.0, 95.0, 105.0], [99.0, 110.0, 121.0, 104.5, 115.5]], 0.05) == []
    # the same medians with tight samples: one run each side cannot tell a step from run-to-run noise,
    # two runs each side that agree can
    assert find_steps([[99.0, 100.0, 101.0], [109.0, 110.0, 111.0]], 0.05) == []
    [step] = find_steps([[99.0, 100.0, 101.0], [99.5, 100.5, 100.0], [109.0, 110.0, 111.0], [110.5, 109.5, 110.0]],
                        0.05)
    assert (step.before, step.after) == (1, 2) and step.low <= 1.1 <= step.high


@pytest.mark.parametrize("seed", range(5))
def test_run_to_run_noise_with_tight_samples_gives_no_step(seed):
    """Each run's samples agree within 1 %, but the runs wander 2 % from day to day: no step is claimed,
    least of all on the one run at either end that happens to read low."""
    import random

    rng = random.Random(seed)
    points = [[level * rng.uniform(0.995, 1.005) for _ in range(5)]
              for level in (100 * rng.gauss(1, 0.02) for _ in range(30))]
    points[-1] = [v * 0.94 for v in points[-1]]  # the latest run alone reads 6 % low
    assert find_steps(points, 0.05, str(seed)) == []


def test_two_steps_up_and_back_are_both_found():
    pts = [[100.0, 101.0, 99.0]] * 6 + [[80.0, 81.0, 79.0]] * 6 + [[100.0, 99.5, 100.5]] * 6
    steps = find_steps(pts, 0.05, "x")
    assert [(s.before, s.after) for s in steps] == [(5, 6), (11, 12)]
    assert steps[0].ratio == pytest.approx(0.8, rel=0.02) and steps[1].ratio == pytest.approx(1.25, rel=0.02)


def test_filters_by_campaign_and_model(tmp_path):
    make_db(tmp_path / "f.db", [{"level": 10.0}] * 3)
    assert _series(tmp_path / "f.db", campaign="other") == []
    assert _series(tmp_path / "f.db", model="nobody") == []
    assert len(_series(tmp_path / "f.db", model="tiny-a")) == 1


def test_history_cli_lists_series_and_steps_and_json(tmp_path):
    import json
    import re

    from click.testing import CliRunner

    from cardproof.cli import cli

    runs = [{"level": 100.0, "build": "b7342"}] * 4 + [{"level": 88.0, "build": "b7401"}] * 4
    ids = make_db(tmp_path / "h.db", runs)
    out = CliRunner().invoke(cli, ["history", "--db", str(tmp_path / "h.db")])
    assert out.exit_code == 0, out.output
    assert (re.search(r"decode of tiny-a \(short, reasoning off\) fell 1[0-4]\.\d %", out.output)
            and f"between run {ids[3]} (build b7342) and run {ids[4]} (build b7401)" in out.output
            and "server build b7342 -> b7401" in out.output)
    data = json.loads(CliRunner().invoke(cli, ["history", "--db", str(tmp_path / "h.db"), "--json",
                                               "--model", "tiny-a"]).output)
    [s] = data
    assert [p["run"] for p in s["points"]] == ids
    assert [(st["metric"], st["run_before"], st["run_after"]) for st in s["steps"]] == [("decode_tps", ids[3], ids[4])]
    none = CliRunner().invoke(cli, ["history", "--db", str(tmp_path / "h.db"), "--campaign", "other"])
    assert none.exit_code == 0 and "no series" in none.output
    missing = CliRunner().invoke(cli, ["history", "--db", str(tmp_path / "absent.db")])
    assert missing.exit_code == 1 and "absent.db" in missing.output and not (tmp_path / "absent.db").exists()


@pytest.mark.parametrize("value", ["0", "95", '"5"', "nan"])
def test_a_minimum_effect_out_of_range_is_refused_with_its_key(value):
    from cardproof.daemon.campaign.model import parse_campaign
    from cardproof.daemon.campaign.check import CampaignError
    from history_data import CAMPAIGN

    text = CAMPAIGN.format(name="n", reps=3, model="m", extra=f"[report]\nmin_effect_pct = {value}\n")
    with pytest.raises(CampaignError, match=r"n\.toml: key 'report\.min_effect_pct'"):
        parse_campaign(text, "n.toml")


def test_a_load_time_step_is_told_once_per_model_not_once_per_cell(tmp_path):
    runs = [{"level": 50.0, "load": 2.0, "build": "b1"}] * 6 + [{"level": 50.0, "load": 3.0, "build": "b2"}] * 6
    ids = make_db(tmp_path / "l.db", runs, classes=("short", "medium"))
    series = _series(tmp_path / "l.db")
    assert len(series) == 2
    steps = [(s["prompt_class"], st["metric"], st["before"]["run_id"], st["after"]["run_id"])
             for s in series for st in s["steps"]]
    assert steps == [("medium", "load_seconds", ids[5], ids[6])]
    [load_step] = [st for s in series for st in s["steps"]]
    assert load_step["low"] <= 0.5 <= load_step["high"] and load_step["regression"]  # slower to load


def test_impossible_figures_are_left_out_of_a_series(tmp_path):
    """A counter of 0, a negative or an infinite rate (a server's bad answer stored as is) is no figure."""
    ids = make_db(tmp_path / "z.db", [{"level": 1, "values": [10.0, 0.0, -5.0, float("inf"), 11.0]}] * 3)
    [series] = _series(tmp_path / "z.db")
    assert [p["values"]["decode_tps"] for p in series["points"]] == [[10.0, 11.0]] * 3
    assert [p["run_id"] for p in series["points"]] == ids


def test_a_point_added_at_the_end_judges_again_only_the_candidates_next_to_it(monkeypatch):
    """The verdicts kept from the last search (``find_steps(..., judged=(last, used))``) give the steps a
    search without them gives; after one more point only candidates whose windows reach it are judged."""
    import random

    from cardproof.report.history import steps as steps_module

    rng = random.Random(7)
    pts = [[lvl * rng.uniform(0.98, 1.02) for _ in range(5)] for lvl in [100.0] * 15 + [80.0] * 15 + [100.0] * 15]
    calls = []
    judge = steps_module.judge
    monkeypatch.setattr(steps_module, "judge", lambda *a: calls.append(a[3]) or judge(*a))
    first: dict = {}
    assert find_steps(pts, 0.05, "x", ({}, first)) == find_steps(pts, 0.05, "x")
    searched = len(calls) // 2
    assert searched >= 2 and len(first) == searched
    calls.clear()
    pts.append([100.5, 99.5, 100.0, 101.0, 99.0])
    again: dict = {}
    fresh = find_steps(pts, 0.05, "x")
    fresh_calls = len(calls)
    calls.clear()
    assert find_steps(pts, 0.05, "x", (first, again)) == fresh
    assert len(calls) < fresh_calls
    # a candidate judged last time is judged again only where its window after the split reaches the new point
    assert all(seed not in {k[0] for k in first} or int(seed.rsplit("|", 1)[1]) + steps_module.WINDOW_RUNS > len(pts) - 1
               for seed in calls)
    # a kept verdict is what the search uses (the memo is really read)
    key = next(k for k, v in again.items() if v is not None)
    doctored = {k: ((0.5, 0.4, 0.6) if k == key else v) for k, v in again.items()}
    assert 0.5 in [s.ratio for s in find_steps(pts, 0.05, "x", (doctored, {}))]
