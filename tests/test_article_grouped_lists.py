"""Lists that group by model: pairs left out of the reasoning on/off chart (once per reason), cells where a gate fired.

The real run of tests/test_article_findings.py: neither tiny model returns
reasoning text, so every on/off pair of both is left out for the same reason.
"""

from __future__ import annotations

import re

from test_article_findings import _build  # noqa: F401


def test_one_line_per_reason_each_model_once(canary_run_db, tmp_path):  # noqa: F811
    en, de, run_id = _build(canary_run_db, tmp_path / "p")
    section = en[en.index("## Reasoning on and off"):]
    section = section[:section.index("\n## ")]
    assert section.count("the reasoning switch did not take") == 1, section
    line = next(ln for ln in section.splitlines() if ln.startswith("- the reasoning switch did not take: "))
    # the pairs measured both ways: each class where both cells kept a decode figure (the random-weight
    # run's gates may leave a cell without one, and then it is no pair)
    from cardproof.daemon.store import open_store
    from cardproof.report import queries

    view = queries.run_view(open_store(canary_run_db, mode="ro").db, run_id)
    paired = {m["name"]: [c for c in view["classes"] if all((m["cells"].get((c, r)) or {}).get("decode")
                                                            for r in (False, True))] for m in view["models"]}
    assert paired["tiny-a"] and paired["tiny-b"], paired
    for model in ("tiny-a", "tiny-b"):
        assert line.count(f"{model} (") == 1, line
        classes = re.search(rf"{model} \(([^)]*(?:\)[^;)]*)*)\)", line).group(1)
        assert re.findall(r"\[(\w+)\]\(run-", classes) == paired[model], (classes, paired)
    # no Jinja comment printed into the article ("{#id}" attribute lists are ours and fine)
    assert not re.search(r"\{#[-\s]|[-\s]#\}", en), re.search(r".{40}\{#[-\s].{40}", en)
    de_section = de[de.index("## Reasoning an und aus"):]
    assert de_section.count("der Reasoning-Schalter griff nicht") == 1


def test_where_gates_fired_names_each_model_once(canary_run_db, tmp_path):  # noqa: F811
    """length_limit fires on every 8-token answer of the real run; in a copy of its database it is marked
    as not fired on one sample, so the gate fired on most cells but not all: one line with its count,
    each model once with its cells."""
    import shutil

    from cardproof.daemon.store import open_store

    copy = tmp_path / "most.db"
    shutil.copy(canary_run_db, copy)
    store = open_store(copy)
    store.db.execute("update gate_results set fired = 0 where id = (select min(g.id) from gate_results g join samples s "
                     "on s.id = g.sample_id where g.gate = 'length_limit' and s.kind = 'measure')")
    store.db.conn.commit()
    store.close()
    en, _de, run_id = _build(copy, tmp_path / "p")
    part = en[en.index("### Where gates fired"):]
    part = part[:part.index("\n### ")]
    line = next(ln for ln in part.splitlines() if ln.startswith("- `length_limit`: "))
    assert re.match(r"- `length_limit`: \d+/\d+ — ", line), line
    for model in ("tiny-a", "tiny-b"):
        assert line.count(f"{model} (") <= 1, line
    assert "· reasoning off]" not in line  # reasoning off is the default; only "reasoning on" is named
    assert re.search(rf"\[short\]\(run-{run_id}-evidence\.md#cell-\d+\) \d+/\d+", line), line
