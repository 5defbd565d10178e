"""Speculative decoding and MTP in third-party logs: what each request's draft did, read by hand.

The two logs (tests/fixtures/logs/real/dockerbuildfiles-*.log, provenance
in the README there) are 2026 llama.cpp builds run with MTP: one embeds the
MTP heads in the target GGUF (``--spec-type mtp``, `docker compose logs`
timestamps, the multi-line ``print_timing`` block with ``draft acceptance
rate``), the other loads a separate draft model (``loading draft model``,
``--spec-type draft-mtp``, the per-line form ``draft acceptance = ...``).
Each request's own acceptance is stored, never the cumulative ``statistics``
line that follows it.
"""

from __future__ import annotations

from pathlib import Path

from cardproof.daemon.logs import import_path, load_summaries
from cardproof.daemon.store import open_store

REAL = Path(__file__).parent / "fixtures" / "logs" / "real"


def _import(tmp_path, name):
    store = open_store(tmp_path / "t.db")
    try:
        import_path(store, REAL / name)
        db = store.db
        first = db.execute("select min(id) from log_lines").fetchone()[0]
        rows = db.execute(
            "select o.line_id - ? + 1, o.task, o.slot, o.prompt_tokens, o.generated_tokens, o.draft_accepted,"
            " o.draft_generated, o.ts from observed_requests o order by o.id", [first]).fetchall()
        (load,) = load_summaries(db)
    finally:
        store.close()
    return load, [tuple(r) for r in rows]


def test_mtp_in_the_target_model_behind_compose_timestamps(tmp_path):
    load, rows = _import(tmp_path, "dockerbuildfiles-qwen36-mtp-compose.log")
    # (line, task, slot, prompt, generated, accepted, drafted, time from the compose prefix)
    assert rows == [
        (322, 0, 3, 133, 2048, 1186, 1207, "2026-05-14T22:40:29.046000"),
        (351, 921, 3, 11, 10, 6, 6, "2026-05-14T22:40:43.119000"),
    ]
    assert load["facts"]["spec_type"] == "mtp"
    assert "draft_model" not in load["facts"]  # the MTP heads are in the target's own file
    # the MTP draft context's buffers are the draft's, not added to the target's
    assert load["facts"]["kv_buffer_mib"] == {"CUDA0": 4352.0}
    assert load["facts"]["draft_kv_buffer_mib"] == {"CUDA0": 272.0}
    # no server clock: the prefix's wall clock dates the load (model line .. model loaded)
    assert (load["requested_at"], load["ready_at"]) == ("2026-05-14T22:14:13.295000", "2026-05-14T22:14:32.517000")
    assert "load_seconds" not in load["facts"]
    assert load["observed"]["draft_acceptance"] == round((1186 + 6) / (1207 + 6), 5)


def test_mtp_draft_model_and_per_line_acceptance(tmp_path):
    load, rows = _import(tmp_path, "dockerbuildfiles-gemma4-mtp-draft.log")
    # relative server time only: no wall clock to store
    assert rows == [(94, 0, 9, 22, 90, 65, 100, None), (123, 29, 9, 15, 79, 57, 92, None)]
    assert load["facts"]["draft_model"].endswith("/mtp-gemma-4-12b-it.gguf")
    assert load["facts"]["spec_type"] == "draft-mtp"
    assert load["facts"]["spec_draft_n_max"] == 4
    # the cumulative statistics line (122 / 192 after the second request) is no request of its own
    assert load["observed"]["count"] == 2
    assert load["observed"]["draft_acceptance"] == round((65 + 57) / (100 + 92), 5)


def test_loads_names_the_draft_model_and_the_observed_acceptance(tmp_path):
    """`cardproof loads` says which draft model a load ran with and how much of its drafts the server accepted."""
    from click.testing import CliRunner

    from cardproof.cli import cli

    db = tmp_path / "t.db"
    res = CliRunner().invoke(cli, ["logs", "import", str(REAL / "dockerbuildfiles-gemma4-mtp-draft.log"), "--db", str(db)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["loads", "--db", str(db)])
    assert res.exit_code == 0, res.output
    (line,) = [ln for ln in res.output.splitlines() if "gemma-4-12b-it-UD-Q4_K_XL.gguf" in ln]
    assert "spec draft-mtp (draft mtp-gemma-4-12b-it.gguf)" in line
    # 65 + 57 accepted of 100 + 92 drafted, in the observed part: the server's counters, not measured
    observed = line[line.index("observed"):]
    assert "draft acceptance 63.5% (122/192)" in observed
