"""The article's findings (report/findings/): each rule fires where a generated run carries its statement and
stays silent where it does not -- the silent case is the one that keeps a write-up honest.

Real parts: SQLite stores written with the runner's tables and columns (tests/findings_data.py), the report's
own run view and inputs, the registry as it finds the modules, the German catalogue with the rules' German
merged in. The numbers are synthetic: a rule must be seen against data whose meaning is known.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pkgutil
import re

import pytest

from cardproof.report import findings
from cardproof.report.findings import RULES, FindingRule, findings_for
from cardproof.report.findings.base import Fig, Line
from cardproof.report.findings.show import plain, render
from cardproof.report.i18n import Lang, read_catalogue

from findings_data import GIB, SEED_NINE, M, make_run, shape, view_of

PLACEHOLDER = re.compile(r"\{[a-z_0-9]*\}")


def _found(tmp_path, models, name="r.db", **kw) -> list:
    return findings_for(view_of(tmp_path / name, make_run(tmp_path / name, models, **kw)))


def _of(found, rule):
    return [f for f in found if f.rule == rule]


def _figs(f) -> list[Fig]:
    """Every figure of a finding, nested clauses included."""
    out = []

    def walk(v):
        if isinstance(v, Fig):
            out.append(v)
        elif isinstance(v, Line):
            for x in v.params.values():
                walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    for v in (*f.params.values(), *f.figures):
        walk(v)
    return out


def dense(name, params, decode, *, quant="Q4_K_M", bits=4.9, base=None, tokenizer=None, **kw) -> M:
    return M(name, shape("llama", quant, params, bits=bits, basename=base or name, tokenizer=tokenizer or name),
             decode=decode, **kw)


def moe(name, decode, **kw) -> M:
    return M(name, shape("qwen3moe", "Q4_K_M", 30.53, bits=4.9, basename=name, tokenizer=name, experts=(128, 8),
                         active=3.35), decode=decode, **kw)


# -- the registry and the messages ----------------------------------------------------------------------------

MODULES = sorted(m.name for m in pkgutil.iter_modules(findings.__path__) if m.name not in findings.HELPERS)


def test_the_registry_is_every_rule_module_in_its_order():
    assert set(RULES) == set(MODULES) == {"architecture", "ladder", "ranking", "crossover", "context", "loads", "symptoms", "room",
                                          "kvcache", "kvtype", "quality"}
    for name in MODULES:
        module = importlib.import_module(f"cardproof.report.findings.{name}")
        assert isinstance(module.RULE, FindingRule) and module.RULE.name == name and RULES[name] is module.RULE
    assert [r.order for r in RULES.values()] == sorted(r.order for r in RULES.values())


@pytest.mark.parametrize("name", MODULES)
def test_every_message_of_a_rule_has_german_in_the_catalogue(name):
    """Every module-level message constant has German in the catalogue that differs and keeps the placeholders;
    no message is built at run time (a Line's or Finding's text is a constant of the module; a Term may name a
    prompt class)."""
    module = importlib.import_module(f"cardproof.report.findings.{name}")
    po = {m.id: m.string for m in read_catalogue("de") if m.id}
    consts = {v for k, v in vars(module).items() if k.isupper() and isinstance(v, str)}
    assert consts
    for en in consts:
        de = po.get(en)
        assert de and de.strip() and de != en, en
        assert sorted(PLACEHOLDER.findall(en)) == sorted(PLACEHOLDER.findall(de)), en
        assert Lang("de").gettext(en) == de
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("Line", "Finding"):
            args = node.args[2:4] if node.func.id == "Finding" else node.args[:1]
            for arg in args:
                assert isinstance(arg, (ast.Name, ast.IfExp)), ast.unparse(arg)


# -- the seed's nine models -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def seed(tmp_path_factory):
    path = tmp_path_factory.mktemp("seed") / "seed.db"
    rid = make_run(path, SEED_NINE)
    return path, rid, findings_for(view_of(path, rid))


def test_the_seed_run_gives_the_architecture_finding_and_names_the_mixed_ladders(seed):
    _path, _rid, found = seed
    arch = _of(found, "architecture")
    assert len(arch) == 1
    text = str(render(arch[0], Lang("en"))["text"])
    assert "every mixture-of-experts model decodes faster than every dense model" in text
    assert len(arch[0].figures) == 9  # each model with its experts, parameters, bits and decode
    mixed = sorted(f.key for f in _of(found, "ladder") if f.key.startswith("ladder-mixed:"))
    assert mixed == ["ladder-mixed:mistral-small-22b:q8_0|mistral-small-24b:q4_k_m",
                     "ladder-mixed:qwen3-30b-a3b:q4_k_m|qwen3-30b-a3b:q8_0|qwen3-32b:q4_k_m"]
    mistral = next(f for f in found if f.key.startswith("ladder-mixed:mistral"))
    en = plain(mistral, Lang("en"))
    assert "not controlled" in en and "no effect per bit" in en and "parameter count, tokenizer" in en
    assert "×" not in en  # no ratio from an uncontrolled ladder
    # the one controlled ladder of the seed (one base at Q8_0 and Q4_K_M) states its step
    assert [f.key for f in _of(found, "ladder") if f.key.startswith("ladder:")] == [
        "ladder:qwen3-30b-a3b:q4_k_m|qwen3-30b-a3b:q8_0"]
    # nothing it cannot support: no load, crash, context or card figures were generated beyond these
    assert not _of(found, "symptoms") and not _of(found, "room") and not _of(found, "context")


def test_every_figure_of_the_seed_links_to_its_evidence(seed):
    _path, _rid, found = seed
    for f in found:
        figs = _figs(f)
        assert figs, f.key
        linked = [x for x in figs if x.link]
        assert linked, f.key  # each finding rests on figures a reader can follow
        for x in linked:
            assert re.fullmatch(r"(cell|step|sample|line|fig-load|fit)-\d+", x.link), x.link
        en = render(f, Lang("en"))
        assert "](#" in str(en["text"]) + "".join(map(str, en["figures"]))


def test_an_unfinished_run_states_no_finding(tmp_path):
    assert _found(tmp_path, SEED_NINE, status="interrupted") == []
    assert _found(tmp_path, SEED_NINE, name="f.db", status="failed") == []


# -- 1. architecture ------------------------------------------------------------------------------------------

def test_architecture_fires_when_the_groups_are_apart_and_says_whether_the_ranking_follows(tmp_path):
    found = _of(_found(tmp_path, [moe("moe", 150.0), dense("d27", 27.0, 40.0), dense("d32", 32.8, 35.0)]),
                "architecture")
    assert len(found) == 1
    en = plain(found[0], Lang("en"))
    assert "follow their active parameters" in en and "do not all follow" not in en
    de = plain(found[0], Lang("de"))
    assert "Mixture-of-Experts-Modell" in de and "Mrd." in de and "Tok./s" in de


@pytest.mark.parametrize("models", [
    # an 8B dense model as fast as the mixture: the groups overlap, architecture is not what the speeds show
    [moe("moe", 150.0), dense("d8", 8.0, 150.0), dense("d32", 32.8, 35.0)],
    # dense only: no groups to compare
    [dense("d8", 8.0, 120.0), dense("d32", 32.8, 35.0)],
    # the only mixture's cell is unstable: no finding from it
    [moe("moe", 150.0, values=[80.0, 150.0, 160.0, 200.0, 90.0]), dense("d32", 32.8, 35.0)],
    # headers never read (a store from before m023, a server without files): nothing to group by
    [M("a", {"quantisation": "Q4_K_M"}, decode=150.0), M("b", {"quantisation": "Q4_K_M"}, decode=35.0)],
])
def test_architecture_stays_silent_where_the_data_does_not_carry_it(tmp_path, models):
    assert _of(_found(tmp_path, models), "architecture") == []


# -- 2. ladder ------------------------------------------------------------------------------------------------

def _ladder(decodes=(30.0, 55.0, 80.0), **kw):
    quants = (("F16", 16.0), ("Q8_0", 8.5), ("Q4_1", 5.0))
    return [M(f"smol-{q.lower()}", shape("llama", q, 0.135, bits=b, basename="SmolLM2", tokenizer="smol"),
              decode=d, **kw) for (q, b), d in zip(quants, decodes)]


def test_a_ladder_of_one_base_model_states_each_step_with_its_memory(tmp_path):
    models = _ladder()
    for m in models[1:]:
        m.shape["requantized_from"] = "smol-q4_1"
    models[0].shape["requantized_from"] = "smol-q4_1"
    found = _of(_found(tmp_path, models), "ladder")
    assert [f.key for f in found] == ["ladder:smol-f16|smol-q4_1|smol-q8_0"]
    f = found[0]
    assert len(f.figures) == 2  # F16 -> Q8_0 -> Q4_1
    en = plain(f, Lang("en"))
    assert "In the prompt class short, from F16 to Q4_1" in en and "the file goes from" in en and "×2.6" in en
    assert "Requantized from smol-q4_1, with its weights: smol-f16, smol-q8_0, smol-q4_1." in en and "not what it costs in quality" in en


def test_a_step_left_out_as_unstable_is_named_and_the_weights_source_still_said(tmp_path):
    """The demo's shape on a busy machine: the shipped Q4_1 unstable, the two made from it stable."""
    models = _ladder()
    models[2].values = [0.4, 17.8, 14.4, 60.0, 70.0]
    for m in models[:2]:
        m.shape["requantized_from"] = "smol-q4_1"
    (f,) = _of(_found(tmp_path, models), "ladder")
    assert f.key == "ladder:smol-f16|smol-q8_0" and len(f.figures) == 2
    en = plain(f, Lang("en"))
    assert "smol-q4_1 (Q4_1): no step of the ladder, its cell is unstable (0.4 to 70.0 tok/s)" in en
    assert "Requantized from smol-q4_1, with its weights: smol-f16, smol-q8_0." in en


def test_a_ladder_is_stated_in_the_class_where_most_of_its_steps_are_stable(tmp_path):
    """The demo on a busy machine: Q4_1 unstable in short only; the whole ladder holds in long."""
    models = _ladder()
    path = tmp_path / "l.db"
    view = view_of(path, make_run(path, models))
    q4 = next(m for m in view["models"] if m["name"] == "smol-q4_1")
    q4["cells"][("short", False)]["unstable"] = True
    (f,) = _of(findings_for(view), "ladder")
    assert f.key == "ladder:smol-f16|smol-q4_1|smol-q8_0" and "In the prompt class long," in plain(f, Lang("en"))


def test_a_second_file_of_one_quantisation_is_no_step(tmp_path):
    models = _ladder()
    twin = _ladder()[2]
    twin.name = "smol-q4_1-copy"
    (f,) = _of(_found(tmp_path, [*models, twin]), "ladder")
    assert f.key == "ladder:smol-f16|smol-q4_1|smol-q8_0" and len(f.figures) == 2


def test_a_ladder_step_within_the_scatter_is_no_measurable_difference(tmp_path):
    found = _of(_found(tmp_path, _ladder((50.0, 50.5, 51.0), noise=0.05)), "ladder")
    en = plain(found[0], Lang("en"))
    assert "decode shows no measurable difference" in en and "×" not in en


@pytest.mark.parametrize("case", ["one quantisation", "unstable", "other tokenizer"])
def test_a_ladder_stays_silent_or_uncontrolled_where_its_steps_are_not_one_base_model(tmp_path, case):
    models = _ladder()[:2]
    if case == "one quantisation":
        models[1].shape["quantisation"] = "F16"
    elif case == "unstable":
        models[1].values = [20.0, 55.0, 60.0, 90.0, 40.0]
    else:
        models[1].shape["tokenizer_sha256"] = "0" * 64
    found = _of(_found(tmp_path, models), "ladder")
    assert not [f for f in found if f.key.startswith("ladder:")]
    assert [f.key.split(":")[0] for f in found] == (["ladder-mixed"] if case == "other tokenizer" else [])


# -- 3. prefill and decode rank differently -------------------------------------------------------------------

def test_prefill_and_decode_ranking_fires_on_a_measurable_swap(tmp_path):
    found = _of(_found(tmp_path, [dense("fast-decode", 8.0, 90.0, prefill=1000.0),
                                  dense("fast-prefill", 14.0, 60.0, prefill=3000.0)]), "ranking")
    # every class where the order swaps, the short prompts as well as the long ones
    assert [f.key for f in found] == ["ranking:short", "ranking:long"]
    assert all(len(f.figures) == 1 for f in found)
    assert "fast-prefill fills the prompt faster" in plain(found[0], Lang("en"))


def test_end_to_end_crossover_names_the_answer_length_where_the_order_turns(tmp_path):
    """The faster decoder reads prompts slower: for short answers the other model finishes first.
    On 4,000-token prompts at 1,000 against 3,000 tok/s the first token comes 2,667 ms apart
    (4,020 and 1,353 ms); decode at 81 against 54 tok/s (the long class is 10 % slower) gives back
    1000/54 - 1000/81 = 6.17 ms a token: the times meet near 432 tokens."""
    from cardproof.report.findings.crossover import crossover_tokens

    found = _of(_found(tmp_path, [dense("fast-decode", 8.0, 90.0, prefill=1000.0, noise=0.001),
                                  dense("fast-prefill", 14.0, 60.0, prefill=3000.0, noise=0.001)]), "crossover")
    long = [f for f in found if f.key.startswith("crossover:long:")]
    assert len(long) == 1
    en = plain(long[0], Lang("en")).replace("\u00a0", " ")
    assert "fast-prefill answers first for answers up to about 43" in en
    assert "beyond that fast-decode finishes first" in en
    assert "At this run's median answer of 256 tokens" in en
    assert "Antworten bis etwa 43" in plain(long[0], Lang("de")).replace("\u00a0", " ")
    n = crossover_tokens(1353.3, 54.0, 4020.0, 81.0)
    assert 430 < n < 434
    # one model ahead at every length: no crossover
    assert crossover_tokens(1000.0, 90.0, 2000.0, 60.0) is None


def test_end_to_end_crossover_stays_silent_where_one_model_leads_in_both(tmp_path):
    models = [dense("a", 8.0, 90.0, prefill=3000.0, noise=0.01), dense("b", 14.0, 60.0, prefill=1000.0, noise=0.01)]
    assert _of(_found(tmp_path, models), "crossover") == []


@pytest.mark.parametrize("prefill", [(3000.0, 1000.0),  # the same order in both
                                     (1000.0, 1010.0)])  # swapped, but within the scatter
def test_prefill_and_decode_ranking_stays_silent_without_a_measurable_swap(tmp_path, prefill):
    models = [dense("a", 8.0, 90.0, prefill=prefill[0], noise=0.03), dense("b", 14.0, 60.0, prefill=prefill[1],
                                                                           noise=0.03)]
    assert _of(_found(tmp_path, models), "ranking") == []


# -- 4. context costs -----------------------------------------------------------------------------------------

def test_context_cost_per_1000_tokens_and_the_largest_context_that_fits(tmp_path):
    m = dense("d", 8.0, 100.0, depth=[(0, 40, 100.0), (4096, 4136, 80.0)], noise=0.001)
    found = _of(_found(tmp_path, [m], fit={"d": [(8192, "fits"), (32768, "fits"), (65536, "does_not_fit")]}),
                "context")
    assert len(found) == 1
    en = plain(found[0], Lang("en"))
    # 80 against 100 tok/s over 4,096 tokens: -20 % / 4.096 = -4.9 % per 1,000 tokens
    assert "tok/s with 40 tokens: −4.9 % per 1,000 tokens" in en.replace("\u00a0", " ")
    assert "32,768 tokens; 65,536 tokens did not fit" in en
    assert {x.link.split("-")[0] for x in _figs(found[0]) if x.link} == {"step", "fit"}
    assert "je 1.000 Token" in plain(found[0], Lang("de"))


@pytest.mark.parametrize("depth", [
    [(0, 40, 100.0), (4096, 4136, 99.5)],  # within the scatter
    [(0, 40, 100.0)],  # one depth: nothing to compare with
])
def test_context_cost_stays_silent_without_a_measurable_difference(tmp_path, depth):
    m = dense("d", 8.0, 100.0, depth=depth, noise=0.03)
    assert _of(_found(tmp_path, [m]), "context") == []


# -- 5. load costs --------------------------------------------------------------------------------------------

def test_a_load_as_long_as_many_requests_and_the_reloads_are_stated(tmp_path):
    found = _of(_found(tmp_path, [dense("slow-load", 32.0, 40.0, load_s=[100.0, 98.0], wall_s=2.0)]), "loads")
    assert len(found) == 1
    en = plain(found[0], Lang("en"))
    assert re.search(r"as long as 49\.\d requests", en) and "evicted it and loaded it again during the measurement (1×)" in en
    assert {x.link.split("-")[0] for x in _figs(found[0]) if x.link} == {"fig", "cell"}


def test_a_load_shorter_than_the_stability_limit_of_a_request_is_no_finding(tmp_path):
    assert _of(_found(tmp_path, [dense("quick", 8.0, 40.0, load_s=[2.5], wall_s=2.0)]), "loads") == []


# -- 6. same symptom, different cause -------------------------------------------------------------------------

def test_one_cell_failing_the_same_way_for_different_causes(tmp_path):
    m = dense("d", 8.0, 40.0, errors=[("connection", "Server disconnected without sending a response."),
                                      ("connection", "[Errno 111] Connection refused")])
    found = _of(_found(tmp_path, [m]), "symptoms")
    assert len(found) == 1 and len(found[0].figures) == 2
    assert all(x.link.startswith("sample-") for x in _figs(found[0]) if x.link)


def test_crashes_told_apart_by_the_server_log(tmp_path):
    m = dense("d", 8.0, 40.0, load_s=[3.0, 3.0, 3.0], errors=[("connection", "Server disconnected"),
                                                              ("connection", "Server disconnected")],
              crashes=["crashed: SIGILL", "crashed: SIGSEGV"])
    path = tmp_path / "c.db"
    rid = make_run(path, [m])
    view = view_of(path, rid)
    # the crashed loads, as the article's Exceptions find them, each serving one of the failed requests
    errors = [s for c in view["cells"] for s in c["errors"]]
    loads = [ld for ld in view["loads"] if ld["end_reason"]]
    assert len(errors) == len(loads) == 2
    for s, ld in zip(errors, loads):
        ld["requested_at"], ld["ended_at"] = s["started_at"], s["started_at"]
    view["crashes"] = [{"id": ld["id"], "model": "d", "end_reason": ld["end_reason"], "line_id": 7 + i,
                        "requested_at": ld["requested_at"], "ended_at": ld["ended_at"]} for i, ld in enumerate(loads)]
    found = _of(findings_for(view), "symptoms")
    assert len(found) == 1
    en = plain(found[0], Lang("en"))
    assert "crashed: SIGILL" in en and "crashed: SIGSEGV" in en and "as the server's log says it" in en


@pytest.mark.parametrize("errors", [
    [("connection", "Connection refused (port 41234)"), ("connection", "Connection refused (port 41877)")],
    [("timeout", "read timed out")],
    [("timeout", "read timed out"), ("connection", "Connection refused")],  # two symptoms, once each
])
def test_the_same_fault_repeated_is_one_cause(tmp_path, errors):
    assert _of(_found(tmp_path, [dense("d", 8.0, 40.0, errors=errors)]), "symptoms") == []


# -- 7. room on the card --------------------------------------------------------------------------------------

def test_room_beside_the_pin_from_the_cards_readings(tmp_path):
    models = [dense("pin", 27.0, 40.0, pinned=True, card_mib=17_000.0), dense("small", 8.0, 90.0, card_mib=6_000.0),
              dense("big", 32.0, 35.0, card_mib=20_000.0)]
    found = _of(_found(tmp_path, models, card_total_mib=24_564.0), "room")
    assert len(found) == 1
    en = plain(found[0], Lang("en"))
    assert "have room for small, not for big" in en and "1.53 GiB would be left" in en
    assert all(x.link.startswith("fig-load-") for x in _figs(found[0]) if x.link)


@pytest.mark.parametrize("case", ["no card", "no pin"])
def test_room_stays_silent_without_the_cards_readings_or_a_pin(tmp_path, case):
    models = [dense("pin", 27.0, 40.0, pinned=case != "no pin", card_mib=17_000.0),
              dense("small", 8.0, 90.0, card_mib=6_000.0)]
    total = None if case == "no card" else 24_564.0
    assert _of(_found(tmp_path, models, card_total_mib=total), "room") == []


def test_findings_are_frozen_values():
    """A finding is data until a page says it: nothing in it is text of one language."""
    for cls in (findings.Finding, findings.Line, findings.Fig):
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen


# -- 8. the KV cache against the weights ------------------------------------------------------------------------

def _smollm2(q4_peak=224.0, f16_peak=389.0, kv=180.0, f16_kv=180.0):
    """SmolLM2's Q4_1 and F16 at 8,192 tokens on a CPU host: weights as the files, one KV cache, measured peaks."""
    q4 = dense("q4_1", 0.135, 60.0, quant="Q4_1", bits=5.8, base="smollm2", tokenizer="t",
               host=(q4_peak, 92.0, kv, 8192))
    f16 = dense("f16", 0.135, 30.0, quant="F16", bits=16.0, base="smollm2", tokenizer="t", pinned=True,
                host=(f16_peak, 258.0, f16_kv, 8192))
    return [q4, f16]


def test_the_kv_cache_makes_a_smaller_file_save_less_memory_than_it_suggests(tmp_path):
    models = _smollm2()
    found = _of(_found(tmp_path, models), "kvcache")
    assert [f.key for f in found] == ["kvcache:q4_1:f16"]
    en = plain(found[0], Lang("en"))
    files = {m.name: m.shape["file_bytes"] for m in models}
    assert "q4_1 holds 42" in en and \
        "less memory than f16 (224 MiB against 389 MiB, in the server process, prompt class short)" in en
    assert f"not the {round((1 - files['q4_1'] / files['f16']) * 100)}" in en, en
    assert "KV cache (180 MiB) is as large as f16's, and larger than its weights (92 MiB)" in en, en
    links = [x.link for x in _figs(found[0]) if x.link]
    # the buffer lines, and the cells whose readings are compared (the same prompt class for both)
    assert any(x.startswith("line-") for x in links) and sum(x.startswith("cell-") for x in links) == 4
    de = plain(found[0], Lang("de"))
    assert "im Serverprozess" in de and "weniger Speicher als f16" in de


def test_the_memory_held_is_the_same_prompt_class_not_each_load_lifetime_peak(tmp_path):
    """A load's own peak spans what else it served (load steps, probes, a prompt cache growing over the run):
    the demo's Q4_1 load peaked at 681 MiB while its short cells held 319. The pair is compared cell by cell."""
    import sqlite3

    path = tmp_path / "r.db"
    rid = make_run(path, _smollm2())
    conn = sqlite3.connect(path)
    conn.execute("update host_memory_samples set rss_mib = 900 where rss_mib = 224")  # the q4_1 load, later on
    conn.commit()
    conn.close()
    (f,) = _of(findings_for(view_of(path, rid)), "kvcache")
    en = plain(f, Lang("en"))
    assert "(224 MiB against 389 MiB, in the server process, prompt class short)" in en and "900" not in en


@pytest.mark.parametrize("case,keys", [
    ("kv below the weights", []),
    # no pair: each model's own KV cache still outweighs its weights, and that alone is said
    ("another kv cache", ["kvcache:q4_1", "kvcache:f16"]),
    ("saving as the files say", ["kvcache:q4_1"]),
    ("no process read", []),
])
def test_the_kv_cache_pair_stays_silent_where_the_data_does_not_carry_it(tmp_path, case, keys):
    models = {"kv below the weights": lambda: _smollm2(kv=50.0, f16_kv=50.0),
              "another kv cache": lambda: _smollm2(f16_kv=360.0),
              "saving as the files say": lambda: _smollm2(q4_peak=140.0),
              "no process read": lambda: [dense(m.name, 0.135, m.decode, quant=m.shape["quantisation"],
                                                pinned=m.pinned) for m in _smollm2()]}[case]()
    assert [f.key for f in _of(_found(tmp_path, models), "kvcache")] == keys
