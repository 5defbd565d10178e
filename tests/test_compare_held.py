"""Comparing runs: what differs between them, and whether the earlier run's headline held.

Real SQLite stores written as the runner writes them, with known numbers (a
real server cannot be made to lose its headline on demand; the demo's own path
does it by swapping model files in tests/test_demo_compare_dates.py). The
campaign texts are real campaign files, read by ``parse_campaign``.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from click.testing import CliRunner

from cardproof.daemon.campaign.frozen import normalised_text
from cardproof.cli import cli
from cardproof.daemon.store import dumps, open_store
from cardproof.report.build import build
from cardproof.report.compare import compare_runs
from cardproof.report.history import build_series
from cardproof.report.history.conditions import Difference, differences, run_conditions

TEXT = """\
[campaign]
name = "held"
prompt_classes = ["short", "medium"]
reasoning = [false]
repetitions = 5
max_tokens = {max_tokens}
{comment}
[server]
url = "http://127.0.0.1:{port}"
log_file = "{log}"

[[models]]
name = "a"

[[models]]
name = "b"
"""

#: five samples around a level, within ±2 %: a stable cell
SPREAD = (0.98, 0.99, 1.0, 1.01, 1.02)


def _text(port: int = 8080, log: str = "/srv/one/logs/llama-server.log", max_tokens: int = 32, comment: str = ""):
    return TEXT.format(port=port, log=log, max_tokens=max_tokens, comment=comment)


def _store(path: Path, runs: list[dict]) -> list[int]:
    """One run per entry: ``levels`` {(model, class): decode tok/s}, ``text`` (the frozen campaign), optional
    ``host`` (runs.host_json), ``version`` (runs.cardproof_version) and ``digest`` {model: file digest}."""
    store = open_store(path)
    db = store.db
    t0 = datetime(2026, 6, 1, tzinfo=timezone.utc)
    ids = []
    with db.conn:
        for i, spec in enumerate(runs):
            start = (t0 + timedelta(hours=i)).isoformat()
            text = spec.get("text") or _text()
            cid = db["campaigns"].insert({"name": "held", "path": "held.toml", "toml_text": text,
                                          "campaign_json": normalised_text(text),
                                          "sha256": hashlib.sha256(text.encode()).hexdigest(),
                                          "registered_at": start}).last_pk
            levels = spec["levels"]
            rid = db["runs"].insert({
                "campaign_id": cid, "host": "h", "gpus_json": dumps({"available": False}), "backend": "llama-server",
                "server_url": "http://127.0.0.1:8080", "server_build": "b1", "started_at": start, "ended_at": start,
                "status": "completed", "exit_code": 0, "samples_planned": 5 * len(levels),
                "samples_measured": 5 * len(levels), "samples_failed": 0, "coverage": 1.0,
                "cardproof_version": spec.get("version", "0.1.0"),
                "host_json": dumps(spec.get("host", {"cpu": "Test CPU", "cpus": 2,
                                                     "load_1m": {"start": 0.5, "end": 0.6}}))}).last_pk
            ids.append(rid)
            for position, ((model, cls), level) in enumerate(sorted(levels.items())):
                digest = spec.get("digest", {}).get(model, f"digest-{model}")
                found = db.execute("select id from models where name = ? and digest = ?", [model, digest]).fetchone()
                mid = found[0] if found else db["models"].insert({"name": model, "digest": digest,
                                                                  "file_bytes": 10**6, "quantisation": "Q4_K_M",
                                                                  "architecture": "llama"}).last_pk
                db["loads"].insert({"run_id": rid, "model_id": mid, "trigger": "explicit", "status": "loaded",
                                    "requested_at": start, "ready_at": start, "load_seconds": 1.0})
                cell = db["cells"].insert({"run_id": rid, "model_id": mid, "position": position,
                                           "prompt_class": cls, "reasoning": 0, "max_tokens": 32, "repetitions": 5,
                                           "pinned": 0, "kind": "measure"}).last_pk
                for rep, f in enumerate(SPREAD, 1):
                    db["samples"].insert({"run_id": rid, "cell_id": cell, "repetition": rep, "started_at": start,
                                          "prompt_tokens": 40, "generated_tokens": 32, "decode_tps": level * f,
                                          "prefill_tps": 500.0, "ttft_ms": 80.0, "wall_ms": 400.0,
                                          "counter_source": "timings", "kind": "measure"})
    store.close()
    return ids


def _levels(short: tuple[float, float], medium: tuple[float, float] | None = (60.0, 30.0)) -> dict:
    out = {("a", "short"): short[0], ("b", "short"): short[1]}
    if medium:
        out |= {("a", "medium"): medium[0], ("b", "medium"): medium[1]}
    return out


def _compare(path: Path, a: int, b: int) -> dict:
    store = open_store(path, mode="ro")
    try:
        return compare_runs(store.db, a, b)
    finally:
        store.close()


def test_each_verdict_of_the_earlier_headline(tmp_path):
    """Held (same winner, ratio ranges overlap), the margin moved (ranges apart), not held (another winner),
    no longer measurable (the same winner within the other's range), not tested (no such cells)."""
    db = tmp_path / "v.db"
    first, same, closer, swapped, even, short_only = _store(db, [
        {"levels": _levels((100.0, 50.0))},
        {"levels": _levels((101.0, 50.0))},
        {"levels": _levels((100.0, 80.0))},
        {"levels": _levels((50.0, 100.0))},
        {"levels": _levels((100.0, 99.0))},
        {"levels": _levels((100.0, 50.0), medium=None)},
    ])
    verdicts = {b: {h["cls"]: h["verdict"] for h in _compare(db, first, b)["held"]}
                for b in (same, closer, swapped, even, short_only)}
    assert verdicts[same] == {"short": "held", "medium": "held"}
    assert verdicts[closer] == {"short": "margin moved", "medium": "held"}
    assert verdicts[swapped] == {"short": "not held", "medium": "held"}
    assert verdicts[even] == {"short": "not measurable", "medium": "held"}
    assert verdicts[short_only] == {"short": "held", "medium": "not tested"}
    cmp = _compare(db, first, swapped)
    assert cmp["held_summary"] == "not held"
    [short] = [h for h in cmp["held"] if h["cls"] == "short"]
    assert (short["before"]["best"], short["after"]["best"]) == ("a", "b")
    assert _compare(db, first, closer)["held_summary"] == "margin moved"


def test_the_article_says_whether_the_headline_held_with_its_range_across_runs(tmp_path):
    """Run 3's article: run 2's headline did not hold (another winner), linked to both runs' cells, with the
    ratio's range across the three runs beside each run's own range, in English and German."""
    db = tmp_path / "a.db"
    _store(db, [{"levels": _levels((100.0, 50.0))}, {"levels": _levels((90.0, 50.0))},
                {"levels": _levels((50.0, 100.0))}])
    build(db, tmp_path / "p", run_mkdocs=False)
    site = tmp_path / "p" / "site" / "runs"
    en = (site / "run-3.md").read_text().split("## Comparison with earlier runs", 1)[1].split("\n## ", 1)[0]
    assert "**The headline of run 2 did not hold in this run.**" in en, en
    assert "| prompt class | Run 2 | this run | across runs | Headline |" in en, en
    store = open_store(db, mode="ro")
    cell = {(r, m, c): i for i, r, m, c in store.db.execute(
        "select cells.id, run_id, models.name, prompt_class from cells join models on models.id = model_id")}
    store.close()
    short = next(line for line in en.splitlines() if line.startswith("| short |"))
    # run 2: a over b ×1.80 (within the run ×1.73-1.87); across runs 1-3 a/b from ×0.50 to ×2.00
    assert f"[a](run-2-evidence.md#cell-{cell[(2, 'a', 'short')]}) ×1.80 (×1.73–1.87)" in short, short
    assert "×0.50–2.00 (3 runs)" in short, short
    assert (f"**did not hold**: [a](run-2-evidence.md#cell-{cell[(2, 'a', 'short')]}) was the fastest in run 2, "
            f"[b](run-3-evidence.md#cell-{cell[(3, 'b', 'short')]}) in this run") in short, short
    assert "| medium |" in en and "**held**" in en
    de = (site / "run-3.de.md").read_text()
    assert "**Das Ergebnis in einem Satz von Lauf 2 hat sich in diesem Lauf nicht bestätigt.**" in de
    assert "×0,50–2,00 (3 Läufe)" in de and "| über die Läufe |" in de
    assert "war in Lauf 2 am schnellsten" in de
    # run 2's article: run 1's headline held (same winner, ranges overlap? ×2.0 against ×1.8: apart)
    two = (site / "run-2.md").read_text()
    assert "**The headline of run 1 held in this run, but its margin moved.**" in two


def test_campaigns_compared_as_settings_ports_and_paths_apart(tmp_path):
    """The same campaign with new ports, another log folder and a comment is no other campaign: nothing
    that can move a figure differs, the port and the path are said in small print; a changed max_tokens,
    CPU, cardproof version and a busier machine are named, each as before → after."""
    db = tmp_path / "s.db"
    base = _levels((100.0, 50.0))
    first, moved, other = _store(db, [
        {"levels": base, "text": _text(port=41001, log="/srv/one/logs/llama-server.log")},
        {"levels": base, "text": _text(port=52002, log="/srv/two/logs/llama-server.log", comment="# again"),
         "host": {"cpu": "Test CPU", "cpus": 2, "load_1m": {"start": 1.2, "end": 0.9}}},
        {"levels": base, "text": _text(port=52002, log="/srv/two/logs/llama-server.log", max_tokens=64),
         "host": {"cpu": "Other CPU", "cpus": 16, "load_1m": {"start": 3.5, "end": 0.9}}, "version": "0.2.0"},
    ])
    cmp = _compare(db, first, moved)
    assert cmp["differences"] == []
    assert [d for _, d in cmp["aside"]] == [("path:server.log_file", "/srv/one/logs/llama-server.log",
                                             "/srv/two/logs/llama-server.log"),
                                            ("port:server.url", "41001", "52002")]
    named = {d.name: d for _, d in _compare(db, moved, other)["differences"]}
    assert named.keys() == {"setting:campaign.max_tokens", "CPU", "cardproof version",
                            "machine load (1-minute average at start / end)"}
    assert named["setting:campaign.max_tokens"][1:] == ("32", "64")
    assert named["CPU"][1:] == ("Test CPU × 2", "Other CPU × 16")
    build(db, tmp_path / "p", run_mkdocs=False)
    page = (tmp_path / "p" / "site" / "compare" / f"run-{moved}-vs-{first}.md").read_text()
    assert "Measured under different conditions" not in page
    assert "No stored condition that can move a figure differs between the two runs." in page
    assert ("<small>Different, but unable to move a figure: path of `server.log_file`: "
            "`/srv/one/logs/llama-server.log` → `/srv/two/logs/llama-server.log`; "
            "port of `server.url`: `41001` → `52002`.</small>") in page
    page = (tmp_path / "p" / "site" / "compare" / f"run-{other}-vs-{moved}.md").read_text()
    assert "    - campaign setting `campaign.max_tokens`: `32` → `64`" in page
    assert "    - machine load (1-minute average at start / end): 1.20 / 0.90 → 3.50 / 0.90" in page
    de = (tmp_path / "p" / "site" / "compare" / f"run-{other}-vs-{moved}.de.md").read_text()
    assert "    - Kampagneneinstellung `campaign.max_tokens`: `32` → `64`" in de
    assert "Auslastung des Rechners (1-Minuten-Durchschnitt zu Beginn / am Ende): 1,20 / 0,90 → 3,50 / 0,90" in de
    # the trend page marks run 3 (max_tokens) and says run 2's port and path apart, in small print
    store = open_store(db, mode="ro")
    try:
        [series] = [s for s in build_series(store.db, model="a") if s["prompt_class"] == "short"]
    finally:
        store.close()
    marked = {p["run_id"]: ([d.name for d in p["changes"]], [d.name for d in p["aside"]]) for p in series["points"]}
    assert marked[moved] == ([], ["path:server.log_file", "port:server.url"])
    assert "setting:campaign.max_tokens" in marked[other][0]


def test_the_machine_load_differs_by_a_busy_cpu_or_more():
    assert differences({"machine load (1-minute average at start / end)": "0.40 / 0.50"},
                       {"machine load (1-minute average at start / end)": "1.30 / 0.70"}) == []
    assert differences({"machine load (1-minute average at start / end)": "0.40 / 0.50"},
                       {"machine load (1-minute average at start / end)": "0.45 / 1.60"}) == [
        Difference("machine load (1-minute average at start / end)", "0.40 / 0.50", "0.45 / 1.60")]


def test_an_older_frozen_text_is_still_read_as_settings():
    """A key an older cardproof allowed (``[server] api_key``) fails parse_campaign: its tables are read as
    they are, the URL's port apart, the key's value never shown."""
    old = _text(port=8080) + "\n"
    old = old.replace('[server]\n', '[server]\napi_key = "sk-secret-value"\n')
    new = old.replace("8080", "9090").replace("max_tokens = 32", "max_tokens = 16")
    diffs = differences(run_conditions({"campaign_text": old}), run_conditions({"campaign_text": new}))
    assert ("port:server.url", "8080", "9090") in diffs
    assert ("setting:campaign.max_tokens", "32", "16") in diffs
    assert not any("sk-secret" in value for d in diffs for value in d)
    assert "sk-secret" not in json.dumps(run_conditions({"campaign_text": old}))


def test_cardproof_compare_names_differences_and_the_headline(tmp_path):
    db = tmp_path / "c.db"
    a, b = _store(db, [{"levels": _levels((100.0, 50.0)), "text": _text(port=41001)},
                       {"levels": _levels((50.0, 100.0)), "text": _text(port=52002, max_tokens=64)}])
    out = CliRunner().invoke(cli, ["compare", str(a), str(b), "--db", str(db)])
    assert out.exit_code == 0, out.output
    assert "  differs: campaign setting campaign.max_tokens 32 -> 64" in out.output
    assert "  differs, cannot move a figure: port of server.url 41001 -> 52002" in out.output
    assert f"  headline of run {a}, short: did not hold: a was fastest in run {a}, b in this run" in out.output
    data = json.loads(CliRunner().invoke(cli, ["compare", str(a), str(b), "--db", str(db), "--json"]).output)
    assert {"model": None, "name": "server.url", "kind": "port", "before": "41001", "after": "52002",
            "moves_figures": False} in data["differences"]
    assert data["held_summary"] == "not held"
