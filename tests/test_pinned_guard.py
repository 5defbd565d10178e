"""The pinned-model rule against the real llama-server, with the card's memory from RECORDED readings.

No NVIDIA GPU exists here, so free memory comes from a recorded-reading
source behind the NVML interface; the server, its loads and the requests
are real. A card too full for the next model means that model is not
loaded (no request is sent: in router mode any request would load it), and
the pinned model is still measured.
"""

from __future__ import annotations

import httpx

from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.memory import RecordedSource
from cardproof.daemon.memory.budget import required_for_model
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from conftest import campaign_text, unload_all

GIB = 2**30


def _card(free_bytes: int) -> dict:
    """One 8 GiB card whose free memory stays ``free_bytes`` (the pinned model holds the rest)."""
    tick = {"devices": [{"used_bytes": 8 * GIB - free_bytes, "util": {"gpu": 0, "memory": 0}}], "processes": []}
    return {"devices": [{"name": "recorded card", "uuid": "GPU-rec-0", "total_bytes": 8 * GIB}], "ticks": [tick] * 3}


def _status(url: str, model: str) -> str | None:
    for m in httpx.get(url + "/models", timeout=10).json()["data"]:
        if m["id"] == model:
            return (m.get("status") or {}).get("value")
    return None


def test_a_load_that_does_not_fit_beside_the_pin_is_refused_and_nothing_is_sent(llama_server, tmp_path):
    unload_all(llama_server.url)
    store = open_store(tmp_path / "pin.db")
    camp = parse_campaign(campaign_text(llama_server.url, models=("tiny-a", "tiny-b"), reps=2, pinned="tiny-b"))
    lines: list[str] = []
    out = run_campaign(store, camp, echo=lines.append, memory_source=RecordedSource(_card(64 * 1024)))
    assert out.status == "completed" and out.measured == 2 and out.failed == 2  # tiny-b measured, tiny-a not
    refused = store.db.execute("select status, error_text from loads l join models m on m.id = l.model_id "
                               "where l.run_id = ? and m.name = 'tiny-a'", [out.run_id]).fetchall()
    assert [r[0] for r in refused] == ["refused"]
    assert refused[0][1].startswith("0.1 MiB free on the cards (GPU0 0.1 MiB) < ")
    assert "pinned model tiny-b" in refused[0][1]
    kinds = store.db.execute("select error_kind, count(*) from samples where run_id = ? and error_kind is not null "
                             "group by 1", [out.run_id]).fetchall()
    assert kinds == [("refused", 2)]
    assert _status(llama_server.url, "tiny-a") != "loaded"  # no request reached the server for it
    check = store.db.execute("select free_mib, required_mib from memory_free_checks c join models m "
                             "on m.id = c.model_id where c.run_id = ? and m.name = 'tiny-a'", [out.run_id]).fetchone()
    need, basis = required_for_model(store.db, store.db.execute(
        "select id from models where name = 'tiny-a'").fetchone()[0])
    assert check == (0.062, need) and "weights file" in basis  # the need is the file's size: a lower bound
    assert any("load tiny-a: refused" in ln for ln in lines)
    store.close()


def test_a_load_that_fits_beside_the_pin_goes_ahead(llama_server, tmp_path):
    unload_all(llama_server.url)
    store = open_store(tmp_path / "pin-ok.db")
    camp = parse_campaign(campaign_text(llama_server.url, models=("tiny-a", "tiny-b"), reps=1, pinned="tiny-b"))
    out = run_campaign(store, camp, echo=lambda s: None, memory_source=RecordedSource(_card(4 * GIB)))
    assert out.status == "completed" and out.measured == 2 and out.failed == 0
    checks = store.db.execute("select m.name, c.free_mib from memory_free_checks c join models m "
                              "on m.id = c.model_id where c.run_id = ? order by c.id", [out.run_id]).fetchall()
    assert checks == [("tiny-a", 4096.0), ("tiny-b", 4096.0)]  # read from the card before each load, once each
    store.close()


def test_the_article_says_which_model_was_not_measured_and_why(llama_server, tmp_path):
    from cardproof.report.build import build

    unload_all(llama_server.url)
    store = open_store(tmp_path / "pin-report.db")
    camp = parse_campaign(campaign_text(llama_server.url, models=("tiny-a", "tiny-b"), reps=1, pinned="tiny-b"))
    out = run_campaign(store, camp, echo=lambda s: None, memory_source=RecordedSource(_card(64 * 1024)))
    store.close()
    build(tmp_path / "pin-report.db", tmp_path / "site", run_mkdocs=False)
    en = (tmp_path / "site" / "site" / "runs" / f"run-{out.run_id}.md").read_text()
    de = (tmp_path / "site" / "site" / "runs" / f"run-{out.run_id}.de.md").read_text()
    assert "Not measured: the load was refused" in en and "tiny-a was never loaded" in en
    assert "pinned model tiny-b" in en and "Reproducible failure" not in en  # no request failed: none was sent
    assert "Nicht gemessen: das Laden wurde verweigert" in de and "tiny-a wurde nie geladen" in de


def test_without_a_card_the_pin_is_guarded_by_the_hosts_available_memory(tmp_path):
    """No card to read: the models share host memory. A model whose server process peaked, in an earlier
    load, above what the host has available now is refused beside the pin; one that fits goes ahead. The
    host's figure is read now (MemAvailable), the need from the stored peak: nothing is assumed."""
    import psutil

    from cardproof.daemon.memory.budget import pin_guard, required_in_host
    from memory_support import add_load, make_run

    class NoCard:
        run_id = None

        def before_load(self, model_id, required_mib=None):
            return {"available": False, "reason": "no NVIDIA driver", "enough": None}

    store, run_id, model_id = make_run(tmp_path / "h.db", model="big")
    cap = NoCard()
    cap.run_id = run_id
    assert required_in_host(store.db, model_id) == (None, None)
    assert pin_guard(store, cap, model_id, "big", "pinned") is None  # no known need: goes ahead, says so
    load_id = add_load(store, run_id, model_id)
    available = psutil.virtual_memory().available / 2**20
    store.insert("host_memory_cells", {"run_id": run_id, "load_id": load_id, "cell_id": None, "status": "ok",
                                       "n_samples": 3, "peak_rss_mib": available + 4096})
    reason = pin_guard(store, cap, model_id, "big", "pinned")
    assert reason and "available in host memory <" in reason and "peak in an earlier load" in reason, reason
    checks = store.db.execute("select available_mib, required_mib, basis from host_memory_checks "
                              "order by id").fetchall()
    assert len(checks) == 2 and checks[1][1] == round(available + 4096, 3) and checks[1][0] > 0
    store.db.execute("update host_memory_cells set peak_rss_mib = 64")
    store.db.conn.commit()
    assert pin_guard(store, cap, model_id, "big", "pinned") is None
