"""The memory section of the run article, in both languages, and the vram command."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.memory import NOT_MEASURED, MemorySampler, NvmlSource, RecordedSource
from cardproof.daemon.memory.selfreport import record_ollama_selfreport
from cardproof.report.build import _env
from cardproof.report.i18n import CATALOGUE, Lang
from cardproof.report.memory import memory_view
from memory_support import FIXTURES, StandIn, add_load, fixture, make_run

from test_memory_reconcile import seed_run  # noqa: F401  (the recorded seed run fixture)


def render(view: dict, lang: str) -> str:
    L = Lang(lang)
    return _env().get_template("sections/memory.md.j2").render(_=L.gettext, L=L, memory=view, run={})


def test_recorded_reading_memory_section_states_the_gap(seed_run):  # noqa: F811
    view = memory_view(seed_run["store"].db, seed_run["run_id"])
    assert view["status"] == "measured" and view["source"] == "recorded"
    assert view["compute_devices"] == ["CUDA0", "CUDA1"]
    en = render(view, "en")
    load_id = view["loads"][0]["load_id"]
    assert f"| qwen3.8:27b · load {load_id} (pinned) | 32.39 | 24.52 | 7.87 | 16.11\\* | 8.41\\* | 2.12 | 2.12 | 2.20 | 1.13 | 0.31 |" in en
    assert "explained by items the self-report omits: 7.57 GiB" in en
    assert "draft/MTP context 2,250.06 MiB (estimate)" in en
    assert "Recorded readings" in en  # replayed figures are never passed off as this run's card
    assert "67.5" in en and "Neighbours, not counted" in en
    assert "(#cell-" in en  # per-cell peak/median link to the evidence
    de = render(view, "de")
    assert "| 32,39 | 24,52 | 7,87 |" in de
    assert "Rohdaten aus einer Aufzeichnung" in de or "Aufgezeichnete Messwerte" in de
    assert "7,57 GiB" in de and "Speicher auf der Karte" in de


def test_no_driver_section_says_so_and_shows_no_card_figure(tmp_path):
    store, run_id, model_id = make_run(tmp_path / "m.db")
    src = NvmlSource() if _no_driver() else RecordedSource(FIXTURES / "no_driver.json")
    MemorySampler(store, src, run_id=run_id).start()
    load_id = add_load(store, run_id, model_id)
    record_ollama_selfreport(store, run_id, load_id, fixture("ollama_ps_seed.json"), "qwen3.8:27b")
    view = memory_view(store.db, run_id)
    assert view["status"] == "not_measured"
    row = view["loads"][0]
    assert row["card_mib"] is None and row["gap_mib"] is None and row["budget"] is None
    assert row["selfreport_mib"] == pytest.approx(25108.48, abs=0.01)
    en = render(view, "en")
    assert NOT_MEASURED in en
    assert "| 24.52 GiB |" in en and "not used in its place" in en
    assert "| Card |" not in en and "Gap" not in en  # no card table at all
    de = render(view, "de")
    assert CATALOGUE[NOT_MEASURED] in de


def test_section_without_memory_rows_says_not_captured(tmp_path):
    store, run_id, _ = make_run(tmp_path / "m.db")
    assert "was not captured" in render(memory_view(store.db, run_id), "en")


def test_every_memory_message_has_german():
    MESSAGES = CATALOGUE  # the memory messages moved into the .po (report/i18n.py)

    src = (FIXTURES.parents[1].parent / "report" / "templates" / "sections" / "memory.md.j2").read_text()
    import re

    used = set(re.findall(r"_\('((?:[^'\\]|\\.)*)'\)", src))
    used = {u.replace("\\'", "'") for u in used}
    from cardproof.report import memory as rm

    used |= set(rm.KIND_LABEL.values()) | set(rm.CATEGORY_LABEL.values()) | {NOT_MEASURED}
    used |= {"steady state after load", "median over the load"}
    recon = (FIXTURES.parents[1].parent / "daemon" / "memory" / "reconcile.py").read_text()
    used |= set(re.findall(r'_note\(\s*"([^"]+)"', recon))
    assert len(used) > 50
    missing = sorted(u for u in used if u not in MESSAGES and u not in CATALOGUE)
    assert missing == []


def _no_driver() -> bool:
    try:
        NvmlSource().open().close()
        return False
    except Exception:
        return True


def test_vram_json_without_driver_is_available_false():
    if not _no_driver():
        pytest.skip("an NVIDIA driver is present")
    res = CliRunner().invoke(cli, ["vram", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["available"] is False and data["message"] == NOT_MEASURED and data["readings"] == []
    text = CliRunner().invoke(cli, ["vram"])
    assert text.exit_code == 0 and text.output.startswith(NOT_MEASURED)


def test_recorded_reading_vram_json_lists_devices_and_processes(tmp_path):
    dev = tmp_path / "dev"
    dev.mkdir()
    server = StandIn(dev / "nvidia0")
    try:
        res = CliRunner().invoke(cli, [
            "vram", "--json", "--count", "2", "--interval", "0.01", "--recorded", str(FIXTURES / "seed_two_3090.json"),
            "--recorded-pid", f"SERVER={server.pid}", "--recorded-pid", f"NEIGHBOUR={server.pid}",
            "--recorded-pid", "DESKTOP=4194400",
        ])
    finally:
        server.stop()
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["available"] is True and data["source"] == "recorded" and len(data["readings"]) == 2
    first = data["readings"][0]
    assert [d["total_mib"] for d in first["devices"]] == [24576.0, 24576.0]
    desktop = [p for p in first["processes"] if p["pid"] == 4194400][0]
    assert desktop["pid_status"] == "foreign" and desktop["name"] is None


def test_vram_text_recorded(tmp_path):
    res = CliRunner().invoke(cli, ["vram", "--recorded", str(FIXTURES / "seed_two_3090.json"), "--recorded-pid",
                                   "SERVER=4194400", "--recorded-pid", "NEIGHBOUR=4194401", "--recorded-pid",
                                   "DESKTOP=4194402"])
    assert res.exit_code == 0, res.output
    assert "GPU1 NVIDIA GeForce RTX 3090" in res.output and "x8/16" in res.output
    assert "not a PID of this namespace" in res.output


def test_recorded_reading_memory_chart_stacks_items_against_the_self_report(seed_run, tmp_path):  # noqa: F811
    """The seed's recorded readings as a stacked SVG chart, labels in the page's language."""
    from cardproof.report.build import _charts

    view = memory_view(seed_run["store"].db, seed_run["run_id"])
    fake_run = {"run": {"id": 99}, "models": [], "classes": [], "reasoning_modes": [], "memory": view}
    out = _charts(fake_run, Lang("de"), tmp_path)
    assert out["memory"] is not None
    svg = (tmp_path / "run-99-memory-de.svg").read_text()
    assert "<svg" in svg and "Gewichte" in svg and "ungekl" in svg
    segments = {r["item"]: r["gib"] for r in out["memory"]["rows"]}
    assert segments["Gewichte"] == pytest.approx(16.11, abs=0.01)
    assert all(r["selfreport"] == pytest.approx(24.52, abs=0.01) for r in out["memory"]["rows"])
