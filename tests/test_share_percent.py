"""A share in a caveat never reads "0 %" when some were counted, nor "100 %" when not all were
(report/i18n.py ``Lang.share``): the demo's draft model had 2 of 1,299 draft tokens accepted."""

from __future__ import annotations

import pytest

from cardproof.report.article_parts import render_caveat
from cardproof.report.caveats import speculative
from cardproof.report.i18n import Lang


def _view(accepted: int, drafted: int) -> dict:
    sample = {"draft_tokens": drafted, "draft_accepted": accepted}
    return {"models": [{"name": "big"}, {"name": "small"}],
            "cells": [{"model": "big", "samples": [sample]}, {"model": "small", "samples": [{"draft_tokens": 0}]}]}


@pytest.mark.parametrize("accepted, drafted, en, de", [
    (2, 1299, "0.2\u00a0%", "0,2\u00a0%"),
    (1298, 1299, "99.9\u00a0%", "99,9\u00a0%"),
    (1, 100000, "&lt;0.01\u00a0%", "&lt;0,01\u00a0%"),  # escaped on its way into the Markdown
    (640, 1000, "64\u00a0%", "64\u00a0%"),
    (0, 50, "0\u00a0%", "0\u00a0%"),
    (50, 50, "100\u00a0%", "100\u00a0%"),
])
def test_the_speculative_caveat_states_the_acceptance_without_rounding_it_away(accepted, drafted, en, de):
    [caveat] = speculative.check(_view(accepted, drafted))
    for code, want in (("en", en), ("de", de)):
        text = str(render_caveat(caveat, Lang(code))["text"])
        assert f", {want})" in text, text


def test_a_share_has_the_fewest_digits_that_keep_it_apart_from_none_and_all():
    L = Lang("en")
    assert [L.share(v) for v in (0.5, 0.004, 0.0004, 0.996, 0.99996)] == \
        ["50\u00a0%", "0.4\u00a0%", "0.04\u00a0%", "99.6\u00a0%", ">99.99\u00a0%"]
    assert L.share(float("nan")) == "—"
