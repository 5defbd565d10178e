"""The Load and Context sections of the article, from a real sweep against the real llama-server.

Real parts: the ``--parallel 4`` llama-server of ``test_load_sweep``, the
run stored in SQLite, ``cardproof report build`` with ``mkdocs build --strict``.
"""

from __future__ import annotations

import re
import sqlite3
import statistics

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.frozen import normalised_text
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.daemon.campaign.slo import knee
from cardproof.report.axes import axes_view
from cardproof.report.i18n import Lang
from conftest import campaign_text
from test_load_sweep import parallel_server  # noqa: F401 -- the shared --parallel 4 server fixture

SLO = "[load.slo]\nper_user_decode_tps = 1\nttft_p90_ms = 60000\n"


@pytest.fixture(scope="module")
def axes_db(parallel_server, tmp_path_factory):  # noqa: F811
    db = tmp_path_factory.mktemp("axes") / "axes.db"
    text = (campaign_text(parallel_server.url, reps=2, max_tokens=16)
            + "\n[load]\nstreams = [1, 2, 4, 8]\nrequests_per_stream = 2\nmax_tokens = 32\n" + SLO
            + "[depth]\ntokens = [0, 400, 5000]\nrepetitions = 2\nmax_tokens = 8\n")
    store = open_store(db)
    out = run_campaign(store, parse_campaign(text), echo=lambda s: None)
    store.close()
    assert out.status == "completed"
    return db, out.run_id, text


def _direct(conn, run_id):
    """Per streams: (median decode tok/s, p90 TTFT) from the stored rows, computed here."""
    out = {}
    for streams, cell in conn.execute("select streams, cell_id from load_steps where run_id = ? and axis = 'load'",
                                      [run_id]):
        ttft = [r[0] for r in conn.execute("select ttft_ms from samples where cell_id = ?", [cell])]
        decode = [r[0] for r in conn.execute("select decode_tps from samples where cell_id = ?", [cell])]
        out[streams] = (statistics.median(decode), statistics.quantiles(ttft, n=100, method="inclusive")[89])
    return out


def _refreeze(conn, run_id, text):
    """Write ``text`` as the run's frozen campaign, parsed the way the run freezes one (the article reads that)."""
    conn.execute("update campaigns set toml_text = ?, campaign_json = ? where id = (select campaign_id from runs "
                 "where id = ?)", [text, normalised_text(text), run_id])
    return conn


def test_service_level_names_the_largest_step_that_meets_it(axes_db):
    db, run_id, text = axes_db
    conn = sqlite3.connect(db)
    direct = _direct(conn, run_id)
    # a TTFT bound between two measured steps' p90: the answer is known from the rows alone
    p90s = sorted(p90 for _, p90 in direct.values())
    bound = (p90s[1] + p90s[2]) / 2
    frozen = text.replace("ttft_p90_ms = 60000", f"ttft_p90_ms = {bound}")
    view = axes_view(_refreeze(conn, run_id, frozen), run_id)
    (entry,) = view["load"]
    expected = max(s for s, (_, p90) in direct.items() if p90 <= bound)
    assert entry["max_streams_at_slo"] == expected
    assert [r["meets"] for r in entry["rows"]] == [direct[r["streams"]][1] <= bound for r in entry["rows"]]
    beyond = entry["beyond"]
    if beyond is not None:  # the first step past the best one that misses: its failing figure is named
        assert beyond["streams"] > expected and ("ttft_p90", pytest.approx(direct[beyond["streams"]][1])) in \
            [(k, v) for k, v in beyond["failed"]]
    # a bound no step meets
    none = axes_view(_refreeze(conn, run_id, text.replace("per_user_decode_tps = 1", "per_user_decode_tps = 1e6")),
                     run_id)
    conn.rollback()  # the store keeps the campaign the run froze, for the module's other tests
    conn.close()
    assert none["load"][0]["best"] is None and none["load"][0]["max_streams_at_slo"] == 0


class F:
    def __init__(self, streams, tps, answer=16, queueing=0, ttft=100.0):
        from cardproof.daemon.store.stats import Spread

        self.step, self.output_tps = {"streams": streams, "queueing": queueing, "total_slots": 1, "id": streams,
                                      "cell_id": streams}, tps
        self.answer_tokens = Spread.of([answer] * 3)
        self.ttft_ms = Spread.of([ttft] * 3)


def test_knee_is_where_aggregate_throughput_stops_rising():
    assert knee([F(1, 100), F(2, 190), F(4, 200), F(8, 205)]).step["streams"] == 2  # 4 and 8 add < 10 %
    assert knee([F(1, 100), F(2, 190), F(4, 380), F(8, 700)]) is None  # still rising at the last step
    assert knee([F(1, 100), F(2, 95)]).step["streams"] == 1
    assert knee([F(1, 100)]) is None


def test_steps_whose_answers_differ_in_length_state_no_knee_and_say_why():
    """The demo's 1-stream step answered 8-9 tokens, its 2-stream step 16: aggregate tok/s then differs by
    the share of time before the first token alone, and "still rises" was an artefact."""
    from cardproof.report.axes import _swept, knee_sentence

    steps = [F(1, 100, answer=8), F(2, 190, answer=16), F(4, 200, answer=16)]
    assert knee(steps) is None
    e = _swept(steps, None)
    assert e["unequal"] == (8, 16) and e["knee"] is None
    en = str(knee_sentence(Lang("en"), "load", e))
    assert "differ in length (median 8 to 16 tokens per request)" in en and "no knee is stated" in en
    assert "Knick" in str(knee_sentence(Lang("de"), "load", e))
    # within 20 % of each other the steps are compared as before
    assert knee([F(1, 100, answer=15), F(2, 190, answer=16), F(4, 200, answer=17)]).step["streams"] == 2


def test_streams_beyond_the_slots_are_said_to_measure_queueing():
    from cardproof.report.axes import _swept, queueing_sentence

    e = _swept([F(1, 100, ttft=300.0), F(2, 101, queueing=1, ttft=610.0)], None)
    en = str(queueing_sentence(Lang("en"), e))
    assert en.startswith("From 2 streams on, the server has 1 slot: requests wait for a slot")
    assert "610 ms against 300 ms in the first step (1)" in en
    assert "Warteschlange" in str(queueing_sentence(Lang("de"), e))
    assert str(queueing_sentence(Lang("en"), _swept([F(1, 100), F(2, 190)], None))) == ""


def test_article_shows_load_and_context_sections_in_both_languages(axes_db, tmp_path):
    db, run_id, _ = axes_db
    project = tmp_path / "proj"
    result = CliRunner().invoke(cli, ["report", "build", "--db", str(db), "--project", str(project)])
    assert result.exit_code == 0, result.output
    conn = sqlite3.connect(db)
    agg = {s: g / w for s, g, w in conn.execute(
        "select st.streams, sum(s.generated_tokens), st.wall_s from load_steps st join samples s on s.cell_id = st.cell_id "
        "where st.axis = 'load' group by st.id")}
    steps = sorted(i for (i,) in conn.execute("select id from load_steps where run_id = ?", [run_id]))
    prompt_n = statistics.median(r[0] for r in conn.execute(
        "select s.prompt_tokens from load_steps st join samples s on s.cell_id = st.cell_id where st.depth_tokens = 400"))
    # the refusal is said in the page's language with its numbers (a Said of daemon/run/load/depth.py)
    for lang, suffix, heading, context, queueing, refused in (
            ("en", "", "## Load: concurrent streams", "## Context depth", "queueing", "refused: depth 5,000 tokens"),
            ("de", ".de", "## Last: gleichzeitige Streams", "## Kontexttiefe", "Warteschlange",
             "abgelehnt: Tiefe 5.000 Token")):
        L = Lang(lang)
        md = (project / "site" / "runs" / f"run-{run_id}{suffix}.md").read_text()
        # every step's first cell is its anchor and a link to its samples on the evidence page
        linked = re.compile(rf'<span id="fig-step-(\d+)"></span>\[([^\]]*)\]\(run-{run_id}-evidence\.md#step-(\d+)\)')
        assert sorted(int(a) for a, _, b in linked.findall(md) if a == b) == steps
        md = linked.sub(r"\2", md)
        assert heading in md and context in md
        load = md[md.index(heading):md.index(context)]
        for streams, tps in agg.items():
            assert f"| {streams}" in load and L.num(tps) in load
        assert f"| 8<br><small>{queueing}</small> | 4 |" in load
        assert f"run-{run_id}-load-0-{lang}.svg" in load
        ctx = md[md.index(context):]
        assert f"| 400 | {L.num(prompt_n, 0)} | 2/2 |" in ctx
        assert f"| {L.num(5000, 0)} | — | 0 | {refused}" in ctx  # the depth with its thousands separator
        # the evidence page shows what each step's aggregate is made of, and each request's ITL
        ev = (project / "site" / "runs" / f"run-{run_id}-evidence{suffix}.md").read_text()
        for sid, generated, wall in conn.execute(
                "select st.id, sum(s.generated_tokens), st.wall_s from load_steps st join samples s "
                "on s.cell_id = st.cell_id where st.axis = 'load' and s.error_kind is null group by st.id"):
            made = {"en": "{t} tokens in {w} s: {a} tok/s aggregate",
                    "de": "{t} Token in {w} s: Gesamtdurchsatz {a} Tok./s"}[lang]
            row = next(ln for ln in ev.splitlines() if f'<span id="step-{sid}"></span>' in ln)
            assert made.format(t=L.num(generated, 0), w=L.num(wall, 3), a=L.num(generated / wall)) in row
        assert "| ITL ms |" in ev
        for chart, title in (("load", heading[3:]), ("context", context[3:])):
            svg = (project / "build" / "site" / "runs" / "img" / f"run-{run_id}-{chart}-0-{lang}.svg").read_text()
            assert f"tiny-a · {title}" in svg  # the chart in the page's language


def test_pass_rules_read_the_largest_step_at_the_service_level(parallel_server, tmp_path):  # noqa: F811
    db = tmp_path / "r.db"
    text = (campaign_text(parallel_server.url, reps=1)
            + "\n[load]\nstreams = [1, 2]\nrequests_per_stream = 1\n[load.slo]\nttft_p90_ms = 600000\n"
            + "[rules]\nserves_two = 'load.max_streams_at_slo >= 2'\nserves_four = 'load.max_streams_at_slo >= 4'\n")
    store = open_store(db)
    run_id = run_campaign(store, parse_campaign(text), echo=lambda s: None).run_id
    store.close()
    rows = dict(sqlite3.connect(db).execute("select rule_name, outcome from rule_results where run_id = ?", [run_id]))
    # every step answered within ten minutes' p90: both steps meet the level, so two streams is the answer
    assert rows == {"serves_two": "pass", "serves_four": "fail"}


def test_a_misspelt_load_rule_name_is_refused_before_the_run():
    from cardproof.daemon.campaign.model import CampaignError

    text = campaign_text("http://127.0.0.1:9") + "\n[rules]\nr = 'load.max_stream_at_slo >= 2'\n"
    with pytest.raises(CampaignError) as err:
        parse_campaign(text, "c.toml")
    assert "rules.r" in str(err.value) and "load.max_stream_at_slo" in str(err.value)
