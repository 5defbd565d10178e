"""A hostile llama-bench file is refused whole with one line, and nothing is stored.

Real parts: the real CLI and a real SQLite store. The files are written by
the test: what matters here is what llama-bench never writes (JSON nested
100,000 deep, NaN rates, counts beyond 64 bits); real llama-bench output is
imported in test_import_llama_bench.py.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.logs.llamabench import LlamaBenchError, parse

ROW = {"n_prompt": 16, "n_gen": 0, "avg_ts": 100.0, "stddev_ts": 1.0, "samples_ts": [99.0, 101.0],
       "samples_ns": [1000, 1010], "build_commit": "abc", "model_filename": "m.gguf", "n_threads": 2}


def _counts(db: Path) -> dict:
    conn = sqlite3.connect(db)
    tables = [r[0] for r in conn.execute("select name from sqlite_master where type = 'table'")]
    out = {t: conn.execute(f'select count(*) from "{t}"').fetchone()[0] for t in tables}
    conn.close()
    return out


def _invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _deep(n: int) -> str:
    return "[" * n + "]" * n


@pytest.mark.parametrize("name,text,fragment", [
    ("deep.json", _deep(100_000), "nested too deeply"),
    ("deep.jsonl", '{"n_prompt": ' + _deep(100_000) + "}\n", "line 1: JSON nested too deeply"),
    ("deep-row.json", json.dumps([ROW | {"extra": json.loads(_deep(50))}]), "nested more than 8 levels"),
    ("nan.json", json.dumps([ROW | {"avg_ts": float("nan")}]), "avg_ts is not a finite number"),
    ("inf-depth.jsonl", json.dumps(ROW | {"n_depth": float("inf")}) + "\n", "n_depth is not a non-negative integer"),
    ("str-depth.jsonl", json.dumps(ROW | {"n_depth": "deep"}) + "\n", "n_depth is not a non-negative integer"),
    ("huge.jsonl", json.dumps(ROW) + "\n" + json.dumps(ROW | {"n_gen": 10**30}) + "\n", "line 2: "),
    ("bool.jsonl", json.dumps(ROW | {"n_prompt": True}) + "\n", "n_prompt is not a non-negative integer"),
    ("samples.jsonl", json.dumps(ROW | {"samples_ts": [1.0, "fast"]}) + "\n", "samples_ts holds a value"),
    ("samples-nan.jsonl", json.dumps(ROW | {"samples_ts": [float("inf")]}) + "\n", "samples_ts holds a value"),
])
def test_hostile_llama_bench_file_is_one_line_error_and_stores_nothing(tmp_path, name, text, fragment):
    path = tmp_path / name
    path.write_text(text)
    fresh = tmp_path / "fresh.db"
    res = _invoke("import", "llama-bench", path, "--db", fresh)
    assert res.exit_code == 1, res.output
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: ") and fragment in lines[0], lines
    assert not fresh.exists()  # checked before the database is even opened
    kept = tmp_path / "kept.db"
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(ROW) + "\n")
    assert _invoke("import", "llama-bench", good, "--db", kept).exit_code == 0
    before = _counts(kept)
    assert _invoke("import", "llama-bench", path, "--db", kept).exit_code == 1
    assert _counts(kept) == before


def test_optional_fields_of_odd_types_are_stored_as_null_not_a_crash(tmp_path):
    """A newer llama-bench may change a configuration field's type: the row is kept whole in row_json."""
    path = tmp_path / "odd.jsonl"
    path.write_text(json.dumps(ROW | {"n_threads": "2,4", "n_batch": 1e300, "main_gpu": 2**70, "poll": None}) + "\n")
    db = tmp_path / "b.db"
    assert _invoke("import", "llama-bench", path, "--db", db).exit_code == 0
    row = sqlite3.connect(db).execute(
        "select n_threads, n_batch, main_gpu, poll, row_json from llama_bench_results").fetchone()
    assert row[:4] == (None, None, None, None) and json.loads(row[4])["n_threads"] == "2,4"


def test_jsonl_line_separator_inside_a_string_is_not_a_line_break():
    text = json.dumps(ROW | {"cpu_info": "a\u2028b"}, ensure_ascii=False) + "\n"
    fmt, rows = parse(text, "sep.jsonl")
    assert fmt == "jsonl" and rows[0]["cpu_info"] == "a\u2028b"
    with pytest.raises(LlamaBenchError, match="line 2: not valid JSON"):
        parse(text + "{\n", "sep.jsonl")
