"""The log-evidence section: facts link to their lines, every line has an anchor,
foreign text is escaped, and mkdocs --strict accepts the anchors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cardproof.daemon.logs import import_path
from cardproof.daemon.store import open_store, utcnow
from cardproof.report.build import _env, mkdocs_build, scaffold
from cardproof.report.evidence import fact_anchor, journal_excerpt, run_evidence
from cardproof.report.i18n import Lang

FIXTURE = Path(__file__).parent / "fixtures" / "logs" / "router-interleaved.log"
HOSTILE = '[45707] 0.00.100.000 I srv  log_server_r: request: {"content": "<script>alert(1)</script> *b* [x](http://e) | p"}'


@pytest.fixture
def evidence_db(tmp_path):
    lines = FIXTURE.read_text().splitlines()
    at = next(i for i, t in enumerate(lines) if t.startswith("[45707]") and "model loaded" in t)
    log = tmp_path / "hostile.log"
    log.write_text("\n".join(lines[:at] + [HOSTILE] + lines[at:]) + "\n")
    store = open_store(tmp_path / "e.db")
    cid = store.insert("campaigns", {"name": "t", "sha256": "x", "registered_at": utcnow()})
    run_id = store.insert("runs", {"campaign_id": cid, "started_at": utcnow(), "status": "completed"})
    import_path(store, log, run_id=run_id)
    yield store, run_id
    store.close()


def render(evidence, lang: str, run_id: int) -> str:
    L = Lang(lang)
    return _env().get_template("sections/evidence_logs.md.j2").render(_=L.gettext, L=L, run={"id": run_id},
                                                                      evidence=evidence)


def test_facts_link_to_lines_that_have_anchors(evidence_db):
    store, run_id = evidence_db
    ev = run_evidence(store.db, run_id, max_lines_per_load=20)
    md = render(ev, "en", run_id)
    anchors = set(re.findall(r'<span id="line-(\d+)"></span>', md))
    links = set(re.findall(r"\(#line-(\d+)\)", md))
    assert links and links <= anchors
    b = next(ld for ld in ev["loads"] if ld["model"] == "tiny-b")
    kv = next(r for r in b["fact_rows"] if r["name"] == "kv_buffer_mib")
    raw = store.db.execute("select raw from log_lines where id = ?", [kv["line_id"]]).fetchone()[0]
    assert "KV buffer size" in raw and f"[4.00 MiB](#line-{kv['line_id']})" in md
    assert "more lines of this load are in the database" in md  # the cap is said, not hidden
    assert fact_anchor(ev, b["id"], "kv_buffer_mib", "CPU") == f"#line-{kv['line_id']}"
    assert fact_anchor(ev, b["id"], "spec_type") is not None and fact_anchor(ev, b["id"], "draft_model") is None


def test_german_numbers_and_words(evidence_db):
    store, run_id = evidence_db
    md = render(run_evidence(store.db, run_id), "de", run_id)
    assert "Server-Protokoll" in md and "[4,00 MiB](#line-" in md and "Ladevorgang" in md


def test_spec_excerpt_is_picked_by_fact(evidence_db):
    store, run_id = evidence_db
    ev = run_evidence(store.db, run_id)
    a = next(ld for ld in ev["loads"] if ld["model"] == "tiny-a")
    b = next(ld for ld in ev["loads"] if ld["model"] == "tiny-b")
    texts_a = [x["text"] for x in journal_excerpt(store.db, a["id"])]
    assert any("adding speculative implementation 'draft-simple'" in t for t in texts_a)
    assert any("--spec-type" in t for t in texts_a)  # the flag line joins its value line
    assert sum("draft acceptance" in t for t in texts_a) == 2  # first and last request only
    texts_b = [x["text"] for x in journal_excerpt(store.db, b["id"])]
    assert texts_b and all(t.startswith("[45707]") for t in texts_b)
    assert any("no implementations specified" in t for t in texts_b)


def test_site_builds_strict_and_escapes_log_text(evidence_db, tmp_path):
    store, run_id = evidence_db
    ev = run_evidence(store.db, run_id)
    project = tmp_path / "proj"
    scaffold(project)
    runs = project / "site" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    for lang, suffix in (("en", ""), ("de", ".de")):
        (runs / f"index{suffix}.md").write_text(f"# Runs\n\n[Run {run_id}](run-{run_id}.md)\n")
        (runs / f"run-{run_id}{suffix}.md").write_text(f"# Run {run_id}\n\n" + render(ev, lang, run_id))
    site = mkdocs_build(project)
    html = (site / "runs" / f"run-{run_id}.html").read_text()  # pages are name.html (use_directory_urls: false)
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    hostile_id = store.db.execute("select id from log_lines where raw like '%<script>%'").fetchone()[0]
    assert f'id="line-{hostile_id}"' in html
    for target in set(re.findall(r'href="#(line-\d+)"', html)):
        assert f'id="{target}"' in html
