"""Pairs left out of the reasoning on/off chart are listed once per reason, each model once with its classes.

The real run of tests/test_article_findings.py: neither tiny model returns
reasoning text, so every on/off pair of both is left out for the same reason.
"""

from __future__ import annotations

import re

from test_article_findings import _build, canary_run_db  # noqa: F401


def test_one_line_per_reason_each_model_once(canary_run_db, tmp_path):  # noqa: F811
    en, de, run_id = _build(canary_run_db, tmp_path / "p")
    section = en[en.index("## Reasoning on and off"):]
    section = section[:section.index("\n## ")]
    assert section.count("the reasoning switch did not take") == 1, section
    line = next(ln for ln in section.splitlines() if ln.startswith("- the reasoning switch did not take: "))
    for model in ("tiny-a", "tiny-b"):
        assert line.count(f"{model} (") == 1, line
        classes = re.search(rf"{model} \(([^)]*(?:\)[^;)]*)*)\)", line).group(1)
        assert "[short](run-" in classes and "[medium](run-" in classes, classes
    # no Jinja comment printed into the article ("{#id}" attribute lists are ours and fine)
    assert not re.search(r"\{#[-\s]|[-\s]#\}", en), re.search(r".{40}\{#[-\s].{40}", en)
    de_section = de[de.index("## Reasoning an und aus"):]
    assert de_section.count("der Reasoning-Schalter griff nicht") == 1
