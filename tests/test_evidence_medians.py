"""The evidence page shows which sample each median of the article is, figure by figure.

A cell's decode median and its prefill median are often different samples: marking one sample
"median" beside both columns told a reader the prefill median was a figure it was not. Real parts:
a generated store (tests/findings_data.py) and the real report step; the Markdown is read here.
"""

from __future__ import annotations

import re
import sqlite3
import statistics

from cardproof.report.build import build

from findings_data import M, make_run


def test_each_column_bolds_its_own_median(tmp_path):
    db = tmp_path / "m.db"
    rid = make_run(db, [M("a", decode=50.0, prefill=2000.0, noise=0.05)], reps=5)
    build(db, tmp_path / "proj", run_mkdocs=False)
    page = (tmp_path / "proj" / "site" / "runs" / f"run-{rid}-evidence.md").read_text()
    conn = sqlite3.connect(db)
    cell = conn.execute("select id from cells where run_id = ? and prompt_class = 'short'", [rid]).fetchone()[0]
    rows = conn.execute("select id, decode_tps, prefill_tps from samples where cell_id = ? order by id",
                        [cell]).fetchall()
    conn.close()
    decode_median = statistics.median(r[1] for r in rows)
    prefill_median = statistics.median(r[2] for r in rows)
    by_decode = next(r[0] for r in rows if r[1] == decode_median)
    by_prefill = next(r[0] for r in rows if r[2] == prefill_median)
    assert by_decode != by_prefill  # the seeded noise makes them two samples: the case that was misread

    def line(sid: int) -> list[str]:
        text = next(ln for ln in page.splitlines() if f'<span id="sample-{sid}"></span>' in ln)
        return [c.strip() for c in text.split("|")]

    bold = re.compile(r"^\*\*[\d.,]+\*\*$")
    decode_line, prefill_line = line(by_decode), line(by_prefill)
    # columns: cell, sample, repetition, nonce, prompt, generated, decode, prefill, TTFT, ...
    assert bold.match(decode_line[7]) and not bold.match(decode_line[8])
    assert bold.match(prefill_line[8]) and not bold.match(prefill_line[7])
    assert "**median**" not in page
