"""The fit test (``[fit]``): a model loaded at each context, fits on the cards or not.

The CPU cases run the real llama-server on the tiny models and read its real
log. No NVIDIA GPU exists here: the "fits" and "does not fit" cases read
recorded logs (a real published RTX 5090 log, and lines written in the real
server's shapes, tests/fixtures/fit/README.md) and recorded NVML readings
(``RecordedSource``, tests/fixtures/nvml/fit_rtx5090.json), while the one
request is still answered by the real llama-server over HTTP.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.campaign.model import CampaignError, parse_campaign
from cardproof.daemon.run.load.fit import fit_model
from cardproof.daemon.run.load.fit_server import Launched
from cardproof.daemon.logs.fit_evidence import judge, read_lines
from cardproof.daemon.campaign.tables.fit import FitSettings
from cardproof.daemon.memory import RecordedSource
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from conftest import campaign_text
from malformed_server import Answer, FakeServer
from memory_support import FIXTURES as NVML, StandIn, make_run

HERE = Path(__file__).parent
RECORDED = HERE / "fixtures" / "fit"
REAL_5090 = HERE / "fixtures" / "logs" / "real" / "dockerbuildfiles-qwen36-mtp-compose.log"


def fit_text(url: str, contexts, extra: str = "") -> str:
    return campaign_text(url, reps=1) + f"\n[fit]\ncontexts = {list(contexts)}\n{extra}"


def test_cpu_only_run_says_not_on_a_card_with_the_real_buffers_and_kv_growing(llama_server, tmp_path):
    """A whole run: the model file from the router's own listing, two contexts, the real log's figures."""
    db = tmp_path / "f.db"
    store = open_store(db)
    lines: list[str] = []
    rules = '\n[rules]\nfits_8k = "fit.max_context >= 8192"\nnone_fits = "fit.max_context == 0"\n'
    out = run_campaign(store, parse_campaign(fit_text(llama_server.url, [2048, 8192]) + rules), echo=lines.append)
    store.close()
    assert out.status == "completed"
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    rows = conn.execute("select * from fit_checks where run_id = ? order by position", [out.run_id]).fetchall()
    assert [(r["context_tokens"], r["verdict"], r["ctx_size"]) for r in rows] == \
        [(2048, "not_on_card", 2048), (8192, "not_on_card", 8192)]
    assert [r["n_ctx_train"] for r in rows] == [16384, 16384]
    for r in rows:
        assert r["request_ok"] == 1 and r["completion_tokens"] > 0
        assert r["kv_card_mib"] == 0 and r["resident_mib"] is None
        assert r["memory_note"].startswith("card memory: not measured")
        buffers = json.loads(r["buffers_json"])
        assert buffers["CPU"]["compute_buffer_mib"] > 0 and buffers["CPU_Mapped"]["model_buffer_mib"] > 0
        # every figure is linked to the line it was read from, and that line belongs to this load
        ev = json.loads(r["evidence_json"])
        kv_line = conn.execute("select raw, load_id from log_lines where id = ?", [ev["kv"][0]]).fetchone()
        assert "CPU KV buffer size" in kv_line[0] and kv_line[1] == r["load_id"]
        load = conn.execute("select trigger, status, end_reason from loads where id = ?", [r["load_id"]]).fetchone()
        assert tuple(load) == ("fit", "loaded", "fit test")
    # in host memory: the server process was read before it stopped, against what the host had before
    for r in rows:
        assert 0 < r["host_peak_mib"] < r["host_available_mib"] <= r["host_total_mib"], dict(r)
        assert r["host_anon_mib"] is not None and r["host_verdict"] == "fits"
    # f16 K and V for every cell: four times the context, four times the KV cache
    assert rows[1]["kv_host_mib"] == pytest.approx(4 * rows[0]["kv_host_mib"]) and rows[0]["kv_host_mib"] > 0
    # the progress line shows the stored buffers; which host buffers there are depends on the CPU
    # (a CPU with AMX gets an "AMX" buffer beside "CPU" and a larger compute buffer)
    cpu = sum(json.loads(rows[0]["buffers_json"])["CPU"].values())
    (line,) = [ln for ln in lines if ln.startswith("fit tiny-a 2,048 tokens: ")]
    assert line.startswith("fit tiny-a 2,048 tokens: not on a card (KV 0.0 MiB on cards, 1.0 MiB on host; buffers "), line
    assert f"CPU {cpu:.1f} MiB" in line and "CPU_Mapped " in line, line
    # not on a card is not a fit: the largest context that fits is 0, and a rule over it is decided
    outcomes = dict(conn.execute("select rule_name, outcome from rule_results where run_id = ?", [out.run_id]))
    assert outcomes == {"fits_8k": "fail", "none_fits": "pass"}
    # the run's own figures are not the fit loads': its load facts keep the router's context
    from cardproof.daemon.campaign.rules.facts import model_values
    from cardproof.daemon.store import open_store as reopen
    values = model_values(reopen(db).db, out.run_id, rows[0]["model_id"], {})
    assert values["fit.max_context"] == 0.0 and values.get("ctx_size") != 8192


def test_context_beyond_the_trained_context_is_refused_and_a_failed_load_does_not_fit(llama_server, tmp_path,
                                                                                      tiny_models):
    """Real server: 32768 > the tiny model's 16384 is refused with one line; a corrupt file's load fails,
    is stored as does_not_fit with the loader's words, and the next context still runs."""
    store, run_id, model_id = make_run(tmp_path / "s.db", model="tiny-a")
    lines: list[str] = []
    rows = fit_model(store, run_id=run_id, model="tiny-a", model_id=model_id, model_file=str(tiny_models["tiny-a"]),
                     settings=FitSettings(contexts=[32768, 1024]), source=None, echo=lines.append)
    assert [r["verdict"] for r in rows] == ["refused", "not_on_card"]
    assert lines[0] == ("fit tiny-a 32,768 tokens: refused: context 32,768 tokens exceeds the model's trained "
                        "context of 16,384 tokens")
    assert rows[0].get("load_id") is None  # nothing was started for a refused context
    broken = tmp_path / "broken.gguf"
    data = tiny_models["tiny-a"].read_bytes()
    broken.write_bytes(data[: len(data) // 2])
    rows = fit_model(store, run_id=run_id, model="tiny-a", model_id=model_id, model_file=str(broken),
                     settings=FitSettings(contexts=[1024, 2048]), source=None, echo=lines.append)
    assert [r["verdict"] for r in rows] == ["does_not_fit", "does_not_fit"]
    assert "the load failed: " in rows[0]["reasons_text"] and "error loading model" in rows[0]["reasons_text"]
    assert rows[0]["request_ok"] == 0
    status = store.db.execute("select status, error_text from loads where id = ?", [rows[0]["load_id"]]).fetchone()
    assert status[0] == "failed" and "exited with status" in status[1]
    assert len(store.db.execute("select id from fit_checks").fetchall()) == 4


def test_a_missing_file_or_binary_is_a_refusal_not_a_verdict_on_the_model(tmp_path, tiny_models, monkeypatch):
    """A remote server's path, or no llama-server here: refused with the reason, nothing started."""
    store, run_id, model_id = make_run(tmp_path / "s.db", model="tiny-a")
    lines: list[str] = []
    row, = fit_model(store, run_id=run_id, model="tiny-a", model_id=model_id, model_file="/srv/models/remote.gguf",
                     settings=FitSettings(contexts=[2048]), source=None, echo=lines.append)
    assert row["verdict"] == "refused" and row.get("load_id") is None
    assert lines == ["fit tiny-a 2,048 tokens: refused: model file not on this machine: /srv/models/remote.gguf"]
    monkeypatch.setenv("CARDPROOF_LLAMA_SERVER", str(tmp_path / "no-such-llama-server"))
    row, = fit_model(store, run_id=run_id, model="tiny-a", model_id=model_id, model_file=str(tiny_models["tiny-a"]),
                     settings=FitSettings(contexts=[2048]), source=None, echo=lines.append)
    assert row["verdict"] == "refused" and "no llama-server to start here: " in row["reasons_text"]
    assert store.db.execute("select status from loads where id = ?", [row["load_id"]]).fetchone()[0] == "refused"


def _recorded_model(folder: Path) -> Path:
    """A file standing for the recorded server's model (not a GGUF: its trained context comes from the log)."""
    path = folder / "recorded-model.bin"
    path.write_bytes(b"recorded")
    return path


def _recorded_launch(log: Path, url: str, pid: int):
    def launch(args, log_path, timeout_s):
        shutil.copyfile(log, log_path)  # the recorded CUDA server's log stands in for this load's
        return Launched(url, pid, lambda: None)
    return launch


def _card_fixture(tmp_path, name):
    dev = tmp_path / "dev"
    dev.mkdir()
    server = StandIn(dev / "nvidia0")
    return RecordedSource(NVML / name, pids={"SERVER": server.pid}, device_prefixes=[str(dev)]), server


@pytest.fixture
def recorded_card(tmp_path):
    source, server = _card_fixture(tmp_path, "fit_rtx5090.json")
    yield source, server.pid
    server.stop()


@pytest.fixture
def recorded_two_cards(tmp_path):
    source, server = _card_fixture(tmp_path, "fit_two_3090.json")
    yield source, server.pid
    server.stop()


def test_recorded_rtx5090_load_fits_with_resident_memory_share_and_free(llama_server, tmp_path, recorded_card):
    """Recorded NVML readings and a real published CUDA log (no NVIDIA GPU here); real request."""
    source, pid = recorded_card
    store, run_id, model_id = make_run(tmp_path / "s.db", model="tiny-a")
    # no GGUF to read (the recorded model is not here): the trained context comes from the log
    row, = fit_model(store, run_id=run_id, model="tiny-a", model_id=model_id, model_file=str(_recorded_model(tmp_path)),
                     settings=FitSettings(contexts=[131072]), source=source, echo=lambda _: None,
                     launch=_recorded_launch(REAL_5090, llama_server.url, pid))
    assert row["verdict"] == "fits", row["reasons_text"]
    assert (row["offloaded_layers"], row["total_layers"], row["ctx_size"]) == (66, 66, 131072)
    assert row["n_ctx_train"] == 262144 and row["n_ctx_train_source"] == "server log"
    assert row["kv_card_mib"] == pytest.approx(4352 + 272) and row["kv_host_mib"] == 0
    assert row["resident_mib"] == pytest.approx(22700.0)  # the larger of the two readings
    assert row["card_total_mib"] == pytest.approx(32607.0) and row["free_mib"] == pytest.approx(9407.0)
    assert row["memory_source"] == "recorded" and row["request_ok"] == 1
    assert json.loads(row["evidence_json"])["missing"] == []


@pytest.mark.parametrize("log, reasons", [
    ("partial_offload_kv_cpu.log", ["7 of 65 layers on the CPU", "KV cache on the CPU: 1,024.0 MiB"]),
    ("oom.log", ["the load failed: ", "out of memory in the log: ", "cudaMalloc failed: out of memory"]),
])
def test_recorded_two_card_load_does_not_fit_and_says_why(llama_server, tmp_path, recorded_two_cards, log, reasons):
    """Recorded logs in the real server's line shapes and recorded NVML readings (no NVIDIA GPU here)."""
    source, pid = recorded_two_cards
    store, run_id, model_id = make_run(tmp_path / "s.db", model="tiny-a")
    launch = _recorded_launch(RECORDED / log, llama_server.url, pid)
    if log == "oom.log":
        def launch(args, log_path, timeout_s):  # noqa: F811 -- the server gave up: it never became ready
            from cardproof.daemon.run.load.fit_server import LaunchFailed
            shutil.copyfile(RECORDED / log, log_path)
            raise LaunchFailed("exited with status 1")
    row, = fit_model(store, run_id=run_id, model="tiny-a", model_id=model_id, model_file=str(_recorded_model(tmp_path)),
                     settings=FitSettings(contexts=[262144]), source=source, echo=lambda _: None, launch=launch)
    assert row["verdict"] == "does_not_fit"
    for words in reasons:
        assert words in row["reasons_text"]
    assert "mlock" not in row["reasons_text"]  # a warning about pinning host pages is no out-of-memory
    if log == "partial_offload_kv_cpu.log":  # both cards read: the server's memory on each, summed
        assert row["resident_mib"] == pytest.approx(22700 + 21800)
        assert row["card_total_mib"] == pytest.approx(2 * 24576) and row["free_mib"] == pytest.approx(1476 + 2476)
    else:  # the server never came up: no reading of its memory is taken
        assert row["resident_mib"] is None and row["load_id"] is not None


def test_evidence_reader_skips_malformed_lines_and_keeps_the_draft_apart():
    lines = list(enumerate([
        "load_tensors: offloaded 10/10 layers to GPU",
        "llama_kv_cache:      CUDA0 KV buffer size = nonsense MiB",  # malformed: no figure, no crash
        "\x1b[31mllama_kv_cache:      CUDA0 KV buffer size =   64.00 MiB\x1b[0m",
        "srv    load_model: loading draft model '/m/draft.gguf'",
        "load_tensors: offloaded 2/4 layers to GPU",  # the draft's: not the target's layer count
        "llama_kv_cache:        CPU KV buffer size =    8.00 MiB",
        "srv    load_model: initializing slots, n_slots = 1",
    ], start=1))
    ev = read_lines(lines)
    assert (ev.offloaded_layers, ev.total_layers) == (10, 10)
    assert ev.kv_card_mib == 64.0 and ev.buffers["CPU"] == {"draft_kv_buffer_mib": 8.0}
    assert ev.kv_host_mib == 8.0  # the draft's cache on the CPU is host memory all the same
    assert ev.evidence["kv"] == [3, 6]


@pytest.mark.parametrize("name, verdict, layers, kv_card_mib, kv_host_mib, reasons", [
    # real published logs (tests/fixtures/logs/real/README.md), read as a fit load's own log
    ("ik-llama-pr237-15x3090.log", "fits", (62, 62), 10980.0, 0.0, []),
    ("llama-runner-metal-2026.log", "fits", (43, 43), 1064.0, 0.0, []),  # MTL0 is the GPU's memory
    ("ollama-0.24-cpu.log", "not_on_card", (None, None), 0.0, 2048.0, []),
    ("dockerbuildfiles-gemma4-mtp-draft.log", "unknown", (None, None), 0.0, 0.0,
     ["the log names no buffer and no offloaded layers"]),  # its mlock and fitting warnings are no failure
    ("local-llama-failed-load.log", "unknown", (None, None), 0.0, 0.0,
     ["the log names no buffer and no offloaded layers"]),
])
def test_real_published_logs_give_the_verdict_their_lines_support(name, verdict, layers, kv_card_mib, kv_host_mib,
                                                                  reasons):
    raw = (HERE / "fixtures" / "logs" / "real" / name).read_bytes().decode("utf-8", "replace").splitlines()
    ev = read_lines(list(enumerate(raw, 1)))
    v = judge(ev, context_tokens=ev.ctx_size or 1, load_error=None, request_error=None, card_readable=True)
    assert (v.verdict, (ev.offloaded_layers, ev.total_layers)) == (verdict, layers)
    assert (ev.kv_card_mib, ev.kv_host_mib) == (pytest.approx(kv_card_mib), pytest.approx(kv_host_mib))
    assert [r.english() for r in v.reasons] == reasons and ev.oom_lines == []


@pytest.mark.parametrize("table, key", [
    ("contexts = []", "fit.contexts"),
    ("contexts = [0]", "fit.contexts[0]"),
    ("contexts = [2048, 2048]", "fit.contexts[1]"),
    ("contexts = [2048.5]", "fit.contexts[0]"),
    ('contexts = ["2048"]', "fit.contexts[0]"),
    ("contexts = [true]", "fit.contexts[0]"),
    ("contexts = [99999999999]", "fit.contexts[0]"),
    ('contexts = [2048]\nmodels = ["nope"]', "fit.models[0]"),
    ('contexts = [2048]\nserver_args = ["-c", "4096"]', "fit.server_args[0]"),
    ('contexts = [2048]\nserver_args = ["--ctx-size=4096"]', "fit.server_args[0]"),
    ('contexts = [2048]\nserver_args = [""]', "fit.server_args[0]"),
    ('contexts = [2048]\nserver_args = ["-ctk", "q8_0", "--log-file", "/tmp/x"]', "fit.server_args[2]"),
    ('contexts = [2048]\nserver_args = ["-lv=0"]', "fit.server_args[0]"),
    ('contexts = [2048]\nserver_args = ["-ctk", 8]', "fit.server_args[1]"),
    ("contexts = [2048]\nload_timeout_s = 0", "fit.load_timeout_s"),
    ("contexts = [2048]\ncolour = 1", "fit.colour"),
    ("contexts = 2048", "fit.contexts"),
    ("models = [\"tiny-a\"]", "fit.contexts"),
    ("models = [\"tiny-a\"]\n[fit.per_model]\ntiny-a = [2048]", "fit.models"),
    ("max_tokens = 8", "fit.contexts"),
    ("[fit.per_model]\nnope = [2048]", "fit.per_model.nope"),
    ("[fit.per_model]\ntiny-a = [2048, 0]", "fit.per_model.tiny-a[1]"),
    ("[fit.per_model]\ntiny-a = 2048", "fit.per_model.tiny-a"),
    ("contexts = [2048]\nper_model = 3", "fit.per_model"),
])
def test_a_bad_fit_table_is_refused_naming_the_key(table, key):
    with pytest.raises(CampaignError) as exc:
        parse_campaign(campaign_text("http://127.0.0.1:1") + f"\n[fit]\n{table}\n")
    assert f"'{key}'" in str(exc.value) and "\n" not in str(exc.value)


def test_per_model_contexts_beside_the_shared_ones():
    text = campaign_text("http://127.0.0.1:1", models=("tiny-a", "tiny-b")) + \
        '\n[fit]\ncontexts = [1024]\nmodels = ["tiny-a"]\n[fit.per_model]\ntiny-b = [4096, 2048]\n'
    fit = parse_campaign(text).sections["fit"]
    assert fit.plan(("tiny-a", "tiny-b")) == [("tiny-a", (1024,)), ("tiny-b", (4096, 2048))]
    only = parse_campaign(campaign_text("http://127.0.0.1:1", models=("tiny-a", "tiny-b"))
                          + "\n[fit.per_model]\ntiny-b = [2048]\n").sections["fit"]
    assert only.plan(("tiny-a", "tiny-b")) == [("tiny-b", (2048,))]


def test_a_bad_fit_table_exits_2_on_the_command_line(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(campaign_text("http://127.0.0.1:1") + "\n[fit]\ncontexts = [-1]\n")
    result = CliRunner().invoke(cli, ["run", str(path), "--db", str(tmp_path / "c.db")])
    assert result.exit_code == 2 and "key 'fit.contexts[0]'" in result.output
    assert not (tmp_path / "c.db").exists()


def test_server_args_reach_the_fit_load(tmp_path, tiny_models):
    """Real server: the campaign's own flags (a q8_0 K cache) change what the log reports for the same context."""
    store, run_id, model_id = make_run(tmp_path / "s.db", model="tiny-a")
    common = dict(run_id=run_id, model="tiny-a", model_id=model_id, model_file=str(tiny_models["tiny-a"]),
                  source=None, echo=lambda _: None)
    plain, = fit_model(store, settings=FitSettings(contexts=[4096]), **common)
    q8, = fit_model(store, settings=FitSettings(contexts=[4096], server_args=("-ctk", "q8_0")), **common)
    assert plain["verdict"] == q8["verdict"] == "not_on_card"
    # f16 K and V at 4096 cells; q8_0 K is 34 bytes per 32 values instead of 64
    assert q8["kv_host_mib"] == pytest.approx(plain["kv_host_mib"] * (1 + 34 / 64) / 2, rel=0.01)
    assert json.loads(q8["server_args_json"]) == ["-ctk", "q8_0"]


def test_a_failed_fit_load_leaves_the_run_going_to_the_next_model(llama_server, tmp_path, tiny_models):
    """A whole run: tiny-a's file is a corrupt copy (its fit load fails), tiny-b's fit load still runs."""
    broken = tmp_path / "tiny-a-broken.gguf"
    data = tiny_models["tiny-a"].read_bytes()
    broken.write_bytes(data[: len(data) // 2])
    text = campaign_text(llama_server.url, models=("tiny-a", "tiny-b"), reps=1)
    text = text.replace('name = "tiny-a"\n', f'name = "tiny-a"\nfile = "{broken}"\n') + "\n[fit]\ncontexts = [1024]\n"
    db = tmp_path / "f.db"
    store = open_store(db)
    lines: list[str] = []
    out = run_campaign(store, parse_campaign(text), echo=lines.append)
    store.close()
    assert out.status == "completed"
    rows = sqlite3.connect(db).execute(
        "select m.name, f.verdict, f.reasons_text from fit_checks f join models m on m.id = f.model_id "
        "order by f.position").fetchall()
    assert [r[:2] for r in rows] == [("tiny-a", "does_not_fit"), ("tiny-b", "not_on_card")]
    assert rows[0][2].startswith("the load failed: ") and "corrupted or incomplete" in rows[0][2]
    assert [line for line in lines if line.startswith("fit ")][1].startswith("fit tiny-b 1,024 tokens: not on a card")


@pytest.mark.parametrize("answer, words", [
    (Answer(b'{"choices": []}', "application/json"), "the answer holds no choices"),
    (Answer(b'{"choices": [', "application/json"), "JSONDecodeError"),
    (Answer(b'[1, 2]', "application/json"), "the answer holds no choices"),
    (Answer(b'{"error": {"message": "context full"}}', "application/json", status=500), "HTTP 500"),
    (Answer(b'{"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": "12", '
            b'"completion_tokens": 1e999}}', "application/json"), None),
])
def test_a_malformed_answer_to_the_one_request_is_a_failed_request(tmp_path, recorded_card, answer, words):
    """A fake server on 127.0.0.1 answers the request (hostile bodies no real server sends on purpose);
    the log and card readings are the recorded RTX 5090 ones (no NVIDIA GPU here)."""
    source, pid = recorded_card
    store, run_id, model_id = make_run(tmp_path / "s.db", model="tiny-a")
    with FakeServer([answer]) as fake:
        row, = fit_model(store, run_id=run_id, model="tiny-a", model_id=model_id,
                         model_file=str(_recorded_model(tmp_path)), settings=FitSettings(contexts=[131072]),
                         source=source, echo=lambda _: None, launch=_recorded_launch(REAL_5090, fake.url, pid))
    if words is None:  # answered; counts of the wrong kind are stored as unknown, never as text or inf
        assert row["verdict"] == "fits" and row["request_ok"] == 1
        assert row["prompt_tokens"] is None and row["completion_tokens"] is None
    else:
        assert row["verdict"] == "does_not_fit" and row["request_ok"] == 0
        assert row["reasons_text"].startswith("the request failed: ") and words in row["reasons_text"]


def test_own_flags_an_older_server_lacks_are_left_out(tmp_path, monkeypatch):
    """A real llama-server knows every flag the fit test passes; a build without --fit gets the rest."""
    from cardproof.daemon.run.load import fit_server as fit

    assert fit.own_args() == list(fit.OWN_ARGS)  # the real binary here
    old = tmp_path / "llama-server"
    old.write_text("#!/bin/sh\necho '-ngl, --gpu-layers N  layers'\necho '-lv, --verbosity N'\n"
                   "echo '--log-colors [on|off]'\necho '--no-webui'\n")
    old.chmod(0o755)
    monkeypatch.setenv("CARDPROOF_LLAMA_SERVER", str(old))
    assert fit.own_args() == ["-ngl", "999", "-lv", "4", "--log-colors", "off", "--no-webui"]


def test_a_load_in_host_memory_fits_only_within_what_the_host_had_available():
    """The host verdict from measured figures alone: the process's peak against MemAvailable before the load;
    no figure, no verdict; a load on a card gets none."""
    from cardproof.daemon.run.load.fit import host_verdict
    from cardproof.daemon.logs.fit_evidence import LoadEvidence

    cpu = LoadEvidence(buffers={"CPU": {"kv_buffer_mib": 180.0}, "CPU_Mapped": {"model_buffer_mib": 92.0}})
    ok = {"host_peak_mib": 310.0, "host_available_mib": 20000.0, "request_ok": 1}
    assert host_verdict("not_on_card", cpu, ok) == "fits"
    assert host_verdict("not_on_card", cpu, {**ok, "host_available_mib": 300.0}) == "does_not_fit"
    assert host_verdict("not_on_card", cpu, {**ok, "host_peak_mib": None}) is None
    assert host_verdict("not_on_card", cpu, {**ok, "request_ok": 0}) is None
    card = LoadEvidence(buffers={"CUDA0": {"kv_buffer_mib": 180.0}})
    assert host_verdict("fits", card, ok) is None
    metal = LoadEvidence(buffers={"MTL0": {"kv_buffer_mib": 180.0}, "MTL0_Mapped": {"model_buffer_mib": 92.0}})
    assert host_verdict("fits", metal, {**ok, "host_available_mib": 300.0}) == "does_not_fit"
