"""Variants against the real llama-server (tiny models): router mode and a single server, each argument
proven from the variant load's own log, a variant whose argument did not take caught, and the article,
the rules and the history reading the variant as a model of its own.

Timings on this shared machine mean nothing (llama.cpp's threads spin-wait): nothing here says a variant
is faster; the article is checked to state a ratio only where the samples are measurably apart.
"""

from __future__ import annotations

import json
import re
import sqlite3

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.server import llamacpp
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report.findings import cells_measurable
from cardproof.report.queries import run_view
from conftest import campaign_text

GATES = "\n[gates.length_limit]\nexclude = false\n[gates.not_on_card]\nexclude = false\n"
VARIANTS = """
[variants]
threads = [1]

[variants.sets]
kv8 = ["-ctk", "q8_0", "-ctv", "q8_0"]
fa = ["-fa", "on"]
ub = ["-ub", "4096"]
ot = ["-ot", "blk\\\\.0\\\\.ffn_up.*=CPU"]

[rules]
proven = 'variant.kv8.kv_cache_type_k == "q8_0" and variant.t1.n_threads == 1 and variant.ub.n_ubatch == 2048'
"""


def _run(url: str, folder, text: str):
    store = open_store(folder / "v.db")
    lines: list[str] = []
    out = run_campaign(store, parse_campaign(text), echo=lines.append)
    store.close()
    return folder / "v.db", out, lines


@pytest.fixture(scope="module")
def router_run(llama_server, tmp_path_factory):
    folder = tmp_path_factory.mktemp("variants-router")
    text = campaign_text(llama_server.url, reps=3) + GATES + VARIANTS
    return _run(llama_server.url, folder, text)


@pytest.fixture(scope="module")
def single_run(tiny_models, tmp_path_factory):
    folder = tmp_path_factory.mktemp("variants-single")
    server = llamacpp.LlamaServerProcess(
        ["-m", str(tiny_models["tiny-b"]), "-c", "2048", "--parallel", "1", "-t", "2", "-lv", "4",
         "--log-colors", "off"], log_path=folder / "single.log").start()
    try:
        text = campaign_text(server.url, models=("tiny-b",), reps=2) + GATES + (
            '\n[variants.sets]\nt1 = ["--threads", "1"]\nkv8 = ["-ctk", "q8_0", "-ctv", "q8_0"]\n'
            'ub = ["-ub", "4096"]\nnp = ["--parallel=2"]\n')
        yield _run(server.url, folder, text)
    finally:
        server.stop()


def _variants(db) -> dict[str, dict]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    return {r["name"]: dict(r) for r in conn.execute(
        "select v.*, m.name as model from variants v join models m on m.id = v.model_id order by v.position")}


def _proof_lines(db, variant: dict) -> dict[str, str]:
    """flag -> the raw log line its check cites, which must be a line of the variant's own load."""
    conn = sqlite3.connect(db)
    out = {}
    for c in json.loads(variant["checks_json"]):
        if c["line_id"] is None:
            continue
        raw, load_id = conn.execute("select raw, load_id from log_lines where id = ?", [c["line_id"]]).fetchone()
        assert load_id == variant["load_id"], (variant["name"], c)
        out[c["flag"]] = raw
    return out


def test_router_each_argument_reached_the_server_and_its_log_says_so(router_run):
    db, out, lines = router_run
    assert out.status == "completed" and out.measured == out.planned == 3 + 5 * 3
    v = _variants(db)
    assert {n: r["status"] for n, r in v.items()} == {"kv8": "took", "fa": "took", "ub": "contradicted",
                                                       "ot": "took", "t1": "took"}
    assert {r["server_kind"] for r in v.values()} == {"router"}
    assert {r["base_args_source"] for r in v.values()} == {"router /models"}
    # the router of cardproof's own started each variant with the base's arguments and the variant's
    t1 = json.loads(v["t1"]["server_args_json"])
    assert t1[t1.index("--threads") + 1] == "1" and t1.count("--threads") == 1
    assert t1[t1.index("--ctx-size") + 1] == "12288" and "--model-draft" in t1  # the base's preset, kept
    proof = _proof_lines(db, v["t1"])
    assert "system_info: n_threads = 1 " in proof["--threads"]
    proof = _proof_lines(db, v["kv8"])
    assert "K (q8_0)" in proof["-ctk"] and "V (q8_0)" in proof["-ctv"]
    assert "flash_attn" in _proof_lines(db, v["fa"])["-fa"]
    assert "blk.0.ffn_up.weight" in _proof_lines(db, v["ot"])["-ot"]  # a debug line: this variant ran at -lv 5
    ot_args = json.loads(v["ot"]["server_args_json"])
    assert ot_args[ot_args.index("--log-verbosity") + 1] == "5"
    # -ub 4096 with the default batch of 2,048: the build caps it, the log says so, the check catches it
    ub = json.loads(v["ub"]["checks_json"])[0]
    assert ub["status"] == "contradicted" and ub["observed"] == "2048" and "-b" in ub["note"]
    assert "n_ubatch              = 2048" in _proof_lines(db, v["ub"])["-ub"]
    assert any("variant tiny-a~ub: contradicted" in line for line in lines)


def test_router_variant_is_a_model_of_its_own_with_cells_loads_and_a_rule_over_it(router_run):
    db, out, _ = router_run
    conn = sqlite3.connect(db)
    cells = conn.execute("select m.name, count(s.id) from cells c join models m on m.id = c.model_id "
                         "join samples s on s.cell_id = c.id where c.run_id = ? and s.error_kind is null "
                         "group by m.name", [out.run_id]).fetchall()
    assert dict(cells) == {"tiny-a": 3, "tiny-a~t1": 3, "tiny-a~kv8": 3, "tiny-a~fa": 3, "tiny-a~ub": 3,
                           "tiny-a~ot": 3}
    loads = conn.execute("select m.name, l.status, l.load_seconds is not null, l.port is not null from loads l "
                         "join models m on m.id = l.model_id where l.run_id = ? and l.origin is null and "
                         "m.name like 'tiny-a~%'", [out.run_id]).fetchall()
    assert sorted(loads) == sorted((n, "loaded", 1, 1) for n in
                                   ("tiny-a~t1", "tiny-a~kv8", "tiny-a~fa", "tiny-a~ub", "tiny-a~ot"))
    # the rule reads the variants through their base; no rule is judged on a variant itself
    rules = conn.execute("select m.name, r.outcome from rule_results r join models m on m.id = r.model_id "
                         "where r.run_id = ?", [out.run_id]).fetchall()
    assert rules == [("tiny-a", "pass")]
    # the derived model keeps its base's file identity
    digests = dict(conn.execute("select name, digest from models where name like 'tiny-a%'").fetchall())
    assert len(set(digests.values())) == 1


def test_router_history_has_each_variant_as_its_own_series(router_run):
    db, _, _ = router_run
    result = CliRunner().invoke(cli, ["history", "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    models = {s["model"] for s in json.loads(result.output)}
    assert {"tiny-a", "tiny-a~kv8", "tiny-a~t1", "tiny-a~ub"} <= models


def test_router_article_states_only_measurable_differences_and_links_every_figure(router_run, tmp_path):
    db, out, _ = router_run
    result = CliRunner().invoke(cli, ["report", "build", "--db", str(db), "--project", str(tmp_path)])
    assert result.exit_code == 0, result.output
    import sqlite_utils

    view = run_view(sqlite_utils.Database(db), out.run_id)
    assert [m["name"] for m in view["models"]] == ["tiny-a"]  # no variant in the headline or main table
    (group,) = view["variants"]
    entries = {e["variant"]["name"]: e for pc in group["classes"] for e in pc["entries"]}
    base_cell = group["classes"][0]["base_cell"]
    article = (tmp_path / "site" / "runs" / f"run-{out.run_id}.md").read_text()
    german = (tmp_path / "site" / "runs" / f"run-{out.run_id}.de.md").read_text()
    evidence = (tmp_path / "site" / "runs" / f"run-{out.run_id}-evidence.md").read_text()
    section = article.split("## Variants", 1)[1].split("\n## ", 1)[0]
    assert "## Varianten" in german and "vom eigenen Protokoll widerlegt" in german
    for name, e in entries.items():
        row = next(r for r in section.splitlines() if r.startswith(f"| `{name}` |") and "#cell-" in r)
        measurable = cells_measurable(e["cell"], base_cell) and not (e["cell"]["unstable"] or base_cell["unstable"])
        # the row's columns: variant | decode | decode against the model | prefill | prefill against the model
        decode_ratio = [c.strip() for c in row.strip().strip("|").split("|")][2]
        if name == "ub":  # contradicted by its log: figures shown, nothing stated
            assert e["decode"] == {"state": "none"} and "no finding" in decode_ratio
        elif measurable:
            assert e["decode"]["state"] == "measurable" and re.search(r"\*\*×\d", decode_ratio), row
        else:  # no decode ratio stated (prefill, a column of its own, may differ measurably)
            assert "×" not in decode_ratio and ("no measurable difference" in decode_ratio
                                                or "unstable" in decode_ratio), row
        # the figure links to the variant's cell on the evidence page, which links back to it
        cid = e["cell"]["id"]
        assert f"(run-{out.run_id}-evidence.md#cell-{cid})" in row and f'id="fig-cell-{cid}"' in row
        assert f"fig-cell-{cid}" in evidence
    assert "A variant's log contradicts its arguments" in article and "tiny-a~ub" in article
    # every verdict links to the log line it rests on, and that line is printed on the evidence page
    anchors = set(re.findall(r'<span id="line-(\d+)"></span>', evidence))
    cited = set(re.findall(rf"run-{out.run_id}-evidence\.md#line-(\d+)", section))
    assert cited and cited <= anchors
    assert (tmp_path / "site" / "runs" / "img" / f"run-{out.run_id}-variants-decode-en.svg").exists()


def test_single_server_variants_start_with_the_servers_own_command_line(single_run):
    db, out, _ = single_run
    assert out.status == "completed" and out.measured == out.planned == 2 + 4 * 2
    v = _variants(db)
    assert {n: r["status"] for n, r in v.items()} == {"t1": "took", "kv8": "took", "ub": "contradicted",
                                                      "np": "took"}
    assert {r["server_kind"] for r in v.values()} == {"single"}
    assert {r["base_args_source"] for r in v.values()} == {"/proc command line"}
    t1 = json.loads(v["t1"]["server_args_json"])
    # the running server's own -c 2048 kept, its -t 2 replaced (one option, one value), the variant's name
    assert t1[t1.index("-c") + 1] == "2048" and "-t" not in t1 and t1[t1.index("--threads") + 1] == "1"
    assert t1[t1.index("--alias") + 1] == "tiny-b~t1"
    assert "n_threads = 1 " in _proof_lines(db, v["t1"])["--threads"]
    assert "K (q8_0)" in _proof_lines(db, v["kv8"])["-ctk"]
    # --parallel=2 as llama-server takes it (no '=' on its command line), its base's --parallel 1 replaced
    np = json.loads(v["np"]["server_args_json"])
    assert np[np.index("--parallel") + 1] == "2" and np.count("--parallel") == 1 and "--parallel=2" not in np
    assert "n_slots = 2" in _proof_lines(db, v["np"])["--parallel"]
    conn = sqlite3.connect(db)
    # each variant's server wrote a log of its own: every line of it is its load's, with its facts
    for r in v.values():
        n_lines, n_facts = conn.execute(
            "select count(*), (select count(*) from facts where load_id = ?) from log_lines where load_id = ?",
            [r["load_id"], r["load_id"]]).fetchone()
        assert n_lines > 50 and n_facts > 5, r["name"]
    seconds = conn.execute("select load_seconds from loads where id = ?", [v["t1"]["load_id"]]).fetchone()[0]
    assert seconds is not None and seconds > 0


def test_a_merged_store_keeps_each_variant_tied_to_its_base_and_its_own_lines(router_run, tmp_path):
    """Another host's runs merged in: ids are renumbered; the variant still names its base, and the
    verdicts the article states are read again from the variant's own lines there."""
    db, _, _ = router_run
    target = tmp_path / "merged.db"
    open_store(target).close()
    # something of this host's first, so that every id of the merged run moves
    open_store(target).upsert_model({"name": "local-model"})
    result = CliRunner().invoke(cli, ["merge", str(db), "--db", str(target)])
    assert result.exit_code == 0, result.output
    import sqlite_utils

    conn = sqlite3.connect(target)
    pairs = conn.execute("select m.name, b.name from variants v join models m on m.id = v.model_id "
                         "join models b on b.id = v.base_model_id").fetchall()
    assert sorted(pairs) == sorted((f"tiny-a~{n}", "tiny-a") for n in ("t1", "kv8", "fa", "ub", "ot"))
    run_id = conn.execute("select id from runs").fetchone()[0]
    (group,) = run_view(sqlite_utils.Database(target), run_id)["variants"]
    for v in group["variants"]:
        for c in v["checks"]:
            if c["line_id"] is not None:
                assert conn.execute("select load_id from log_lines where id = ?",
                                    [c["line_id"]]).fetchone()[0] == v["load_id"]
    assert {v["name"]: v["status"] for v in group["variants"]}["ub"] == "contradicted"
