"""Gate observations and canary reasons are stored as message id + values and said in each page's language.

Real parts: the shipped gate modules and their checks, a real SQLite store
(open_store with every migration), the judge, the package's .po through
``Lang``, and the report's renderer. Hostile rows (damaged JSON, unknown ids,
markup and addresses among the values, deep nesting) are written into the
store as a merged database could hold them.
"""

from __future__ import annotations

import ast
import json
import string
from pathlib import Path

import pytest

from cardproof.daemon.gates import GATES, SampleContext
from cardproof.daemon.store.said import Said, english, said_json
from cardproof.report.i18n import CATALOGUE, Lang, read_catalogue
from cardproof.report.observations import say
from source_trees import parsed

ROOT = Path(__file__).resolve().parent.parent


def _said_msgids() -> dict[str, str]:
    """Every message id the capture side builds a Said from (literal or either side of a conditional)."""
    found: dict[str, str] = {}
    for f in (ROOT / "daemon").rglob("*.py"):
        for node in ast.walk(parsed(f)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Said" and node.args:
                arg = node.args[0]
                options = [arg.body, arg.orelse] if isinstance(arg, ast.IfExp) else [arg]
                for o in options:
                    assert isinstance(o, ast.Constant), f"{f}:{node.lineno}: a Said's message id must be a literal"
                    found[o.value] = f"{f.relative_to(ROOT)}:{node.lineno}"
    return found


def _fields(text: str) -> list[tuple[str, str]]:
    return sorted((name, spec or "") for _lit, name, spec, _c in string.Formatter().parse(text) if name is not None)


def test_every_observation_message_has_german_with_the_same_fields():
    ids = _said_msgids()
    assert len(ids) >= 30
    catalog = read_catalogue("de")
    missing = [(m, where) for m, where in ids.items() if m not in CATALOGUE]
    assert missing == []
    for m in ids:
        msg = catalog.get(m)
        assert msg is not None and not msg.fuzzy and msg.string.strip(), m
        # a German text that drops a field or its number format would print another figure
        assert _fields(msg.string) == _fields(m), (m, msg.string)


def _check(gate: str, ctx: SampleContext, threshold: float = 0.0):
    out = GATES[gate].check(ctx, threshold)
    return out, json.dumps(said_json(out.observed_text))


def test_a_load_inside_the_request_is_said_with_each_locales_decimal_mark():
    out, stored = _check("load_time", SampleContext(sample={}, response={}, max_tokens=8, load_inside_seconds=0.05))
    assert english(out.observed_text) == "model loaded inside the request (0.05 s)"
    assert str(say(Lang("en"), stored, "x")) == "model loaded inside the request (0.05 s)"
    assert str(say(Lang("de"), stored, "x")) == "Modell innerhalb der Anfrage geladen (0,05 s)"


def test_no_gpu_quotes_the_drivers_reason_and_translates_the_rest():
    ctx = SampleContext(sample={}, response={}, max_tokens=8, gpu_available=False,
                        gpu_reason="no NVIDIA driver (NVMLError_LibraryNotFound: NVML Shared Library Not Found)")
    out, stored = _check("not_on_card", ctx)
    de = str(say(Lang("de"), stored))
    assert de.startswith("keine GPU: `no NVIDIA driver (NVMLError_LibraryNotFound") and de.endswith(
        "; das Modell läuft auf der CPU")
    # without a reason from the inventory the fallback is ours, so it is translated too
    _, stored = _check("not_on_card", SampleContext(sample={}, response={}, max_tokens=8))
    assert str(say(Lang("de"), stored)) == "keine GPU: NVML sieht keine; das Modell läuft auf der CPU"


def test_counts_and_shares_use_the_locale_and_no_broken_plural():
    _, stored = _check("empty_answer", SampleContext(sample={"reasoning_chars": 1234}, response={"answer": " x "},
                                                     max_tokens=8))
    assert str(say(Lang("en"), stored)) == "answer characters: 1, reasoning characters: 1,234"
    assert str(say(Lang("de"), stored)) == "Zeichen der Antwort: 1, Zeichen des Reasonings: 1.234"
    _, stored = _check("not_on_card", SampleContext(sample={}, response={}, max_tokens=8, gpu_share=0.875))
    assert str(say(Lang("de"), stored)) == "der Server meldet 88\u00a0% auf der GPU"


def test_several_problems_are_each_said_and_values_from_the_row_are_quoted_or_dashed():
    sample = {"decode_tps": float("inf"), "prefill_tps": None, "predicted_ms": 0.0, "prompt_ms": 12.5,
              "generated_tokens": 1}
    out, stored = _check("counter_sanity", SampleContext(sample=sample, response={}, max_tokens=8), 0.01)
    assert out.fired and out.observed == 4.0
    de = str(say(Lang("de"), stored))
    assert de == ("`decode_tps` = `inf`; `prefill_tps` fehlt; `predicted_ms` = 0; "
                  "`generated_tokens` = 1 (kein Decode-Intervall)")


def test_prose_only_rows_unknown_ids_and_damaged_json_are_quoted_as_stored():
    de = Lang("de")
    old = "model loaded inside the request (0.05 s)"
    # a row written before structured observations: English only, shown as a quotation
    assert str(say(de, None, old)) == f"<q>{old}</q>"
    for stored in ('{"msgid": "a message this cardproof never had {x}", "params": {"x": 1}}',
                   '{"msgid": "model loaded inside the request ({seconds:.2f} s)", "params": {}}',
                   '{"msgid": "model loaded inside the request ({seconds:.2f} s)"',  # cut off
                   '["not", "messages"]', '[]', '{"msgid": 5}', '{"msgid": "counters plausible", "params": [1]}',
                   json.dumps(_nested(200))):
        assert str(say(de, stored, old)) == f"<q>{old}</q>", stored
    assert str(say(de, None, None)) == "—"


def _nested(depth: int) -> dict:
    msg: dict = {"msgid": "no GPU: {reason}; the model runs on the CPU", "params": {"reason": "x"}}
    for _ in range(depth):
        msg = {"msgid": "{observation} (recorded)", "params": {"observation": msg}}
    return msg


def test_values_from_the_store_cannot_inject_markup_or_publish_an_address():
    stored = json.dumps(Said("no GPU: {reason}; the model runs on the CPU",
                             {"reason": "<script>alert(1)</script> from 192.168.1.5 token=sk-abc123"}).to_json())
    de = str(say(Lang("de"), stored))
    assert "<script>" not in de and "192.168.1.5" not in de
    old = "<img src=x onerror=alert(1)> **bold** 10.0.0.7"
    shown = str(say(Lang("de"), None, old))
    assert "<img" not in shown and "**bold**" not in shown and "10.0.0.7" not in shown


def test_a_judged_run_stores_both_forms_and_a_canary_reason_combines_plan_and_observation(tmp_path):
    """The judge's canary settling on the real store: the plan's reason and the recorded line's observation."""
    from cardproof.daemon.gates import default_config
    from cardproof.daemon.run.judge import judge_run
    from cardproof.daemon.store import open_store

    store = open_store(tmp_path / "s.db")
    camp = store.insert("campaigns", {"name": "c", "toml_text": ""})
    run_id = store.insert("runs", {"campaign_id": camp, "status": "complete", "gpus_json": "{}"})
    plan = Said("offload cannot be changed per request; recorded line from {source}", {"source": "https://x/1"})
    store.insert("canaries", {"run_id": run_id, "gate": "not_on_card", "sample_id": None, "result": None,
                              "reason": english(plan), "reason_json": json.dumps(said_json(plan)),
                              "detail_json": json.dumps({"recorded_line": "load_tensors: offloaded 65/66 layers to GPU"})})
    judge_run(store, run_id, default_config())
    row = next(store.db.query("select * from canaries where run_id = ?", [run_id]))
    assert row["result"] == "recorded"
    assert row["reason"] == ("offload cannot be changed per request; recorded line from https://x/1; "
                             "offloaded 65/66 layers (recorded)")
    assert str(say(Lang("de"), row["reason_json"], row["reason"])) == (
        "die Auslagerung lässt sich nicht je Anfrage ändern; aufgezeichnete Zeile aus `https://x/1`; "
        "65/66 Schichten ausgelagert (aufgezeichnet)")
    store.close()


@pytest.mark.parametrize("lang, expected", [("en", "prompt tokens served from cache: 512 (server log, task 79: "
                                                    "prompt tokens in all: 523)"),
                                           ("de", "Prompt-Token aus dem Cache: 512 (Server-Protokoll, Task 79: Prompt-Token "
                                                  "insgesamt: 523)")])
def test_the_cache_count_from_the_server_log(lang, expected):
    ctx = SampleContext(sample={"cached_tokens": 512}, max_tokens=8,
                        response={"cache_from_log": {"task": 79, "prompt_tokens_total": 523}})
    _, stored = _check("prompt_cache_hit", ctx)
    assert str(say(Lang(lang), stored)) == expected


@pytest.mark.parametrize("n, en, de", [
    (0, "The campaign was registered 0 minutes before the run", "Die Kampagne wurde 0 Minuten vor dem Lauf registriert"),
    (1, "The campaign was registered 1 minute before the run", "Die Kampagne wurde 1 Minute vor dem Lauf registriert"),
    (2, "The campaign was registered 2 minutes before the run", "Die Kampagne wurde 2 Minuten vor dem Lauf registriert"),
])
def test_the_registration_age_is_one_sentence_with_its_plural(n, en, de):
    args = ("The campaign was registered %(num)s minute before the run",
            "The campaign was registered %(num)s minutes before the run", n)
    assert (Lang("en").ngettext(*args), Lang("de").ngettext(*args)) == (en, de)


@pytest.mark.parametrize("n, en, de", [
    (1, ("In 1 cell the fastest", "It is marked"), ("In 1 Zelle war", "Sie ist in Tabellen")),
    (2, ("In 2 cells the fastest", "They are marked"), ("In 2 Zellen war", "Sie sind in Tabellen")),
])
def test_a_caveat_that_counts_takes_the_form_for_its_count(n, en, de):
    """The caveat rules' counts go through ngettext: never '1 cells' / '1 Zellen'."""
    from cardproof.report.article_parts import render_caveat
    from cardproof.report.caveats import RULES

    cells = [{"id": i, "model": "tiny-a", "prompt_class": "short", "reasoning": 0, "unstable_by": ["ratio"]}
             for i in range(n)]
    (caveat,) = RULES["unstable"].check({"unstable_cells": cells, "unstable_ratio": 1.5})
    text_en = str(render_caveat(caveat, Lang("en"))["text"])
    text_de = str(render_caveat(caveat, Lang("de"))["text"])
    assert all(part in text_en for part in en), text_en
    assert all(part in text_de for part in de), text_de
