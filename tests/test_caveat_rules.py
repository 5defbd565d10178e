"""A caveat rule is one module (check, order, messages in both languages) plus its test.

Real parts: the package's modules found as the registry finds them, their
source read by Python's own parser, and the report's German catalogue with
the rules' German merged in (report/i18n.py).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re

import pytest

from cardproof.report import caveats
from cardproof.report.caveats import RULES, CaveatRule
from cardproof.report.i18n import Lang, read_catalogue

PLACEHOLDER = re.compile(r"\{[a-z_]*\}")
MODULES = sorted(m.name for m in pkgutil.iter_modules(caveats.__path__) if m.name != "base")


def test_the_registry_is_every_module_of_the_package_in_its_order():
    assert MODULES and set(RULES) == set(MODULES)
    for name in MODULES:
        module = importlib.import_module(f"cardproof.report.caveats.{name}")
        assert isinstance(module.RULE, CaveatRule) and module.RULE.name == name and RULES[name] is module.RULE
    assert [r.order for r in RULES.values()] == sorted(r.order for r in RULES.values())


def _emitted(module) -> list[str]:
    """The title and text of every Caveat(...) the module builds, as the check passes them."""
    out = []
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Caveat":
            title, text = node.args[2:4]
            for arg in (title, text):
                # a message is a constant of the module (or a literal): never built at run time
                assert isinstance(arg, (ast.Name, ast.Constant)), ast.unparse(arg)
                out.append(getattr(module, arg.id) if isinstance(arg, ast.Name) else arg.value)
            assert ast.literal_eval(node.args[0]) == module.RULE.name  # the caveat names its own rule
    return out


def _german(en):
    """The catalogue's German of ``en`` (a (singular, plural) text: its two forms)."""
    po = {m.id: m.string for m in read_catalogue("de") if m.id}
    assert en in po, f"{en!r} is not in the catalogue: run python scripts/catalogue.py"
    return po[en]


@pytest.mark.parametrize("name", MODULES)
def test_every_message_a_rule_emits_has_german_in_the_catalogue(name):
    module = importlib.import_module(f"cardproof.report.caveats.{name}")
    emitted = _emitted(module)
    assert emitted, f"{name} builds no Caveat"
    for en in emitted:
        de = _german(en)
        # a (singular, plural) text has two German forms, one for each
        ens, des = (en, de) if isinstance(en, tuple) else ((en,), (de,))
        assert len(ens) == len(des), en
        for e, d in zip(ens, des):
            assert d.strip() and d != e
            assert sorted(PLACEHOLDER.findall(e)) == sorted(PLACEHOLDER.findall(d)), e


def test_the_rules_german_reaches_the_article():
    de = Lang("de")
    for name in MODULES:
        for en in _emitted(importlib.import_module(f"cardproof.report.caveats.{name}")):
            german = _german(en)
            if isinstance(en, tuple):  # the form for one, and for 0 and 2
                assert (de.translations.ngettext(*en, 1), de.translations.ngettext(*en, 2),
                        de.translations.ngettext(*en, 0)) == (german[0], german[1], german[1])
            else:
                assert de.gettext(en) == german


def test_requantized_models_get_the_same_weights_note_only_when_the_campaign_says_so():
    """A ladder made with llama-quantize --allow-requantize carries one set of weights: the article
    says so per model; a campaign that names no source, or a source not in the run, gets no note."""
    from cardproof.report.caveats import requantized

    cells = [{"model": "q4", "id": 1}, {"model": "q8", "id": 2}, {"model": "f16", "id": 3}]
    text = ('[[models]]\nname = "q4"\n[[models]]\nname = "q8"\nrequantized_from = "q4"\n'
            '[[models]]\nname = "f16"\nrequantized_from = "q4"\n')
    got = requantized.check({"run": {"campaign_text": text}, "cells": cells})
    assert [(c.params["model"], c.params["base"], c.cells) for c in got] == [("q8", "q4", (2, 1)), ("f16", "q4", (3, 1))]
    assert requantized.check({"run": {"campaign_text": text.replace('requantized_from = "q4"\n', "")},
                              "cells": cells}) == []
    assert requantized.check({"run": {"campaign_text": text}, "cells": cells[1:]}) == []  # q4 not measured
    assert requantized.check({"run": {"campaign_text": "not [toml"}, "cells": cells}) == []


def test_requantized_from_must_name_another_model_of_the_campaign(tmp_path):
    from cardproof.daemon.campaign.model import CampaignError, parse_campaign

    head = '[server]\nbackend = "llama-server"\nurl = "http://127.0.0.1:9"\n[[models]]\nname = "a"\n[[models]]\nname = "b"\n'
    assert parse_campaign(head + 'requantized_from = "a"\n', "c.toml").models[1].requantized_from == "a"
    for tail, words in (('requantized_from = "zz"\n', "unknown model"), ('requantized_from = "b"\n', "itself")):
        with pytest.raises(CampaignError) as err:
            parse_campaign(head + tail, "c.toml")
        assert "models[1].requantized_from" in str(err.value) and words in str(err.value)


def test_a_campaign_naming_models_elsewhere_keeps_its_own_name():
    """The check of names in requantized_from / [fit] once reused the campaign's `name` variable:
    the demo's run was titled after its last-checked model, not "demo-smollm2"."""
    from cardproof.daemon.campaign.model import parse_campaign

    text = ('[campaign]\nname = "ladder"\n[server]\nbackend = "llama-server"\nurl = "http://127.0.0.1:9"\n'
            '[[models]]\nname = "a"\n[[models]]\nname = "b"\nrequantized_from = "a"\n')
    assert parse_campaign(text, "c.toml").name == "ladder"
