"""The extension points are declared: backends, gates, migrations, commands.

Backend answers that no real server sends on purpose (a null ``timings``
after a real one, an empty ``usage``) come from the fake server on
127.0.0.1 in tests/malformed_server.py; everything else reads the real
registries and modules.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
from pathlib import Path

import pytest

from cardproof.daemon import backends
from cardproof.daemon.backends import BACKENDS, Backend, BackendError, make_backend
from cardproof.daemon.backends.llamaserver import LlamaServerBackend
from cardproof.daemon.backends.openai import OpenAICompatBackend
from cardproof.daemon.campaign.model import CampaignError, parse_campaign
from malformed_server import GOOD_TIMINGS, GOOD_USAGE, Answer, FakeServer, raw_json, sse
from source_trees import parsed

ROOT = Path(__file__).resolve().parents[1]


def _server(backend: str, extra: str = "") -> str:
    return f'[server]\nbackend = "{backend}"\nurl = "http://127.0.0.1:9"\n{extra}\n[[models]]\nname = "m"\n'


# -- backends -----------------------------------------------------------------

def test_every_registered_backend_is_a_complete_backend_under_its_own_kind():
    assert list(BACKENDS) == ["llama-server", "ollama", "llama-swap", "openai"]
    for kind, cls in BACKENDS.items():
        assert issubclass(cls, Backend) and cls.kind == kind
        assert not inspect.isabstract(cls), f"{kind} leaves {sorted(cls.__abstractmethods__)} undeclared"
        backend = make_backend(kind, "http://127.0.0.1:9", 5)
        try:
            # the optional capabilities answer the declared way instead of being absent
            for name in ("describe_model", "model_blob", "runner_arg"):
                assert callable(getattr(backend, name))
        finally:
            backend.close()


def test_the_backend_registry_is_built_from_the_backend_modules():
    import pkgutil

    plumbing = {"base", "evidence", "http", "interface", "shapes", "validate"}
    found = {m.name for m in pkgutil.iter_modules(backends.__path__)} - plumbing
    # one module per server kind, each naming its class as BACKEND: nothing else lists them
    assert {cls.__module__.rsplit(".", 1)[1] for cls in BACKENDS.values()} == found
    assert [cls.order for cls in BACKENDS.values()] == sorted(cls.order for cls in BACKENDS.values())


def test_an_incomplete_backend_cannot_be_made():
    class Half(Backend):
        kind = "half"

        def models(self):
            return []

    with pytest.raises(TypeError, match="abstract"):
        Half("http://127.0.0.1:9")


def test_campaign_validation_takes_backend_names_and_options_from_the_registry(monkeypatch):
    with pytest.raises(CampaignError) as err:
        parse_campaign(_server("vllm"))
    assert f"expected one of {', '.join(BACKENDS)}, got str 'vllm'" in str(err.value)
    with pytest.raises(CampaignError, match="expected one of .* got list"):
        parse_campaign(_server("llama-server").replace('"llama-server"', '["llama-server"]'))

    class Extra(OpenAICompatBackend):
        kind = "extra"
        options = ("api_key", "num_ctx")

    # a backend added to the registry is a valid name, and its options are accepted, with nothing else edited
    monkeypatch.setitem(BACKENDS, "extra", Extra)
    assert parse_campaign(_server("extra", "num_ctx = 4096")).num_ctx == 4096
    assert backends.taking("num_ctx") == ["ollama", "extra"]
    with pytest.raises(CampaignError, match="only the ollama and extra backend takes num_ctx"):
        parse_campaign(_server("openai", "num_ctx = 4096"))


def test_only_declared_options_reach_a_backend():
    ollama = make_backend("ollama", "http://127.0.0.1:9", 5, num_ctx=8192, api_key="k")
    server = make_backend("llama-server", "http://127.0.0.1:9", 5, num_ctx=8192, api_key="k")
    try:
        assert ollama.num_ctx == 8192 and "authorization" not in ollama.client.headers
        assert "authorization" not in server.client.headers
    finally:
        ollama.close()
        server.close()


def test_no_caller_probes_a_backend_for_attributes():
    """Runner, sampling, canaries, probes and cell checks use only the declared interface."""
    callers = [ROOT / "daemon" / "run" / n for n in ("runner.py", "record.py", "loads.py", "sampling.py", "canaries.py",
                                                     "cellchecks.py", "probes.py")]
    assert all(p.exists() for p in callers), "a caller named here was moved: name its new place"
    callers += sorted((ROOT / "daemon" / "probes").glob("*.py"))
    probing = re.compile(r"\b(hasattr|getattr)\(\s*(self\.)?backend\b")
    found = [f"{p.name}:{i}" for p in callers
             for i, line in enumerate(p.read_text().splitlines(), 1) if probing.search(line)]
    assert found == []


def test_llama_server_reads_its_stream_through_the_openai_backend():
    assert issubclass(LlamaServerBackend, OpenAICompatBackend)
    # one streaming loop: llama-server's chat has none of its own
    assert "client.stream(" not in inspect.getsource(LlamaServerBackend)


def _stream(*chunks: dict) -> Answer:
    first = {"choices": [{"index": 0, "delta": {"content": "hi there"}, "finish_reason": None}]}
    return Answer(sse(raw_json(first), *(raw_json(c) for c in chunks)))


END = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}


@pytest.mark.parametrize("kind", ["llama-server", "openai"])
def test_a_null_timings_after_a_real_one(kind):
    """llama-server needs the stream's last timings (a null there is no counter: an error);
    a generic server keeps the last real one, as each did before they shared one loop."""
    answer = _stream(END | {"timings": GOOD_TIMINGS}, {"choices": [], "timings": None})
    with FakeServer([answer]) as srv:
        b = make_backend(kind, srv.url, 10)
        try:
            if kind == "llama-server":
                with pytest.raises(BackendError, match="stream ended without a timings object"):
                    b.chat("fake-model", "hello", max_tokens=8, reasoning=False)
            else:
                res = b.chat("fake-model", "hello", max_tokens=8, reasoning=False)
                assert (res.counter_source, res.decode_tps) == ("timings", 100.0)
        finally:
            b.close()


def test_llama_server_stores_its_response_as_before():
    """No client address or wall-clock block in a llama-server sample; an empty usage is not kept."""
    answer = _stream(END | {"timings": GOOD_TIMINGS}, {"choices": [], "usage": GOOD_USAGE}, {"choices": [], "usage": {}})
    with FakeServer([answer, answer]) as srv:
        server, generic = make_backend("llama-server", srv.url, 10), make_backend("openai", srv.url, 10)
        try:
            res = server.chat("fake-model", "hello", max_tokens=8, reasoning=False)
            other = generic.chat("fake-model", "hello", max_tokens=8, reasoning=False)
        finally:
            server.close()
            generic.close()
    assert sorted(res.response) == ["answer", "finish_reason", "reasoning", "timings", "usage"]
    assert res.response["usage"] == GOOD_USAGE and res.response["answer"] == "hi there"
    assert res.request["cache_prompt"] is False and res.request["prompt_chars"] == 5
    assert {"client_addr", "wall_clock"} <= set(other.response) and other.response["usage"] == {}
    assert json.loads(json.dumps(res.response)) == res.response


# -- gates --------------------------------------------------------------------

from cardproof.daemon import gates as gates_pkg  # noqa: E402
from cardproof.daemon.gates import GATES, Canary, Gate, GateOutcome, JudgedRun, default_config  # noqa: E402


def _modules(package) -> set[str]:
    import pkgutil

    return {m.name for m in pkgutil.iter_modules(package.__path__)}


def test_the_gate_registry_is_built_from_the_gate_modules():
    assert list(GATES) == ["load_time", "length_limit", "empty_answer", "not_on_card", "embedding_down",
                           "foreign_load", "busy_host", "prompt_cache_hit", "counter_sanity"]
    # one module per gate, named after it, and nothing registered from anywhere else
    assert _modules(gates_pkg) - {"base"} == set(GATES)
    for name, gate in GATES.items():
        assert gate.check.__module__ == f"cardproof.daemon.gates.{name}"


def test_every_gate_carries_both_languages_and_its_canary():
    from cardproof.report.i18n import CATALOGUE  # the merged catalogue the article translates with

    for name, gate in GATES.items():
        # its German is in the catalogue (report/locale/de/LC_MESSAGES/cardproof.po), not beside the gate
        assert CATALOGUE.get(gate.description) and CATALOGUE[gate.description] != gate.description, name
        assert gate.canary is not None, name
    by_canary = sorted(GATES.values(), key=lambda g: g.canary.order)
    # eviction (load_time) after every canary that needs the model loaded; the recorded one last
    assert [g.name for g in by_canary] == ["length_limit", "empty_answer", "prompt_cache_hit", "counter_sanity",
                                           "foreign_load", "busy_host", "embedding_down", "load_time", "not_on_card"]
    assert len({g.canary.order for g in GATES.values()}) == len(GATES)


def _judged_store(tmp_path, campaign_toml: str):
    from cardproof.daemon.store import open_store

    store = open_store(tmp_path / "j.db")
    from cardproof.daemon.campaign.frozen import normalised_text

    cid = store.insert("campaigns", {"name": "j", "sha256": "0" * 64, "toml_text": campaign_toml,
                                     "campaign_json": normalised_text(campaign_toml),
                                     "registered_at": "2026-01-01T00:00:00+00:00"})
    run_id = store.insert("runs", {"campaign_id": cid, "status": "completed", "started_at": "2026-01-01",
                                   "gpus_json": json.dumps({"available": True})})
    model_id = store.insert("models", {"name": "m"})
    cell_id = store.insert("cells", {"run_id": run_id, "model_id": model_id, "position": 0, "prompt_class": "short",
                                     "reasoning": 0, "max_tokens": 8, "repetitions": 1, "pinned": 0,
                                     "kind": "measure"})
    sample_id = store.insert("samples", {"run_id": run_id, "cell_id": cell_id, "repetition": 1, "nonce": "n",
                                         "started_at": "2026-01-01", "kind": "measure", "stop_reason": "stop",
                                         "generated_tokens": 3, "response_json": json.dumps({"answer": "hi"})})
    return store, run_id, cell_id, sample_id


def test_a_gate_module_alone_brings_its_context_and_its_recorded_canary(tmp_path, monkeypatch):
    """What a new gate file defines -- check, gather, canary -- is all the judge needs."""
    from cardproof.daemon.run.judge import judge_run

    store, run_id, cell_id, sample_id = _judged_store(tmp_path, _server("llama-server"))

    def gather(judged: JudgedRun):
        assert judged.campaign is not None and judged.cells[cell_id]["max_tokens"] == 8
        return lambda sample, response: {"answer_seen": response.get("answer")}

    def check(ctx, threshold):
        return GateOutcome(ctx.extra.get("answer_seen") == "hi", None, f"saw {ctx.extra}, limit {ctx.max_tokens}")

    def recorded(detail):
        from cardproof.daemon.gates import SampleContext

        return SampleContext(sample={}, response={"answer": detail["line"]}, max_tokens=0,
                             extra={"answer_seen": detail["line"]})

    newcomer = Gate("newcomer", "a new gate", check,
                    canary=Canary(lambda run: None, order=99, recorded=recorded), gather=gather)
    monkeypatch.setitem(GATES, "newcomer", newcomer)
    store.insert("canaries", {"run_id": run_id, "gate": "newcomer", "sample_id": None, "result": None,
                              "reason": None, "detail_json": json.dumps({"line": "hi"})})
    fired = judge_run(store, run_id, default_config())
    row = next(store.db.query("select * from gate_results where gate = 'newcomer'"))
    # a gather key that names no SampleContext field reaches the check in extra
    assert (row["fired"], row["observed_text"]) == (1, "saw {'answer_seen': 'hi'}, limit 8")
    assert fired["newcomer"] == 1
    canary = next(store.db.query("select * from canaries where gate = 'newcomer'"))
    assert (canary["result"], canary["reason"]) == ("recorded", "saw {'answer_seen': 'hi'}, limit 0 (recorded)")
    # the judge's own fields are not a gate's to change: the module's mistake is named
    monkeypatch.setitem(GATES, "newcomer", Gate("newcomer", "a new gate", check,
                                                gather=lambda judged: lambda s, r: {"max_tokens": 99}))
    with pytest.raises(ValueError, match="gate newcomer: its gather may not set 'max_tokens'"):
        judge_run(store, run_id, default_config())


@pytest.mark.parametrize("detail, expected", [
    ({"recorded_line": "0.03.232.050 I load_tensors: offloaded 65/66 layers to GPU"},
     ("recorded", "offloaded 65/66 layers (recorded)")),
    ({"recorded_line": "llm_load_tensors: offloaded 61/61 layers to GPU"}, ("not_fired", "offloaded 61/61 layers (recorded)")),
    ({"recorded_line": "offloaded many layers"}, ("not_fired", "recorded line not readable")),
    ({}, ("not_fired", "recorded line not readable")),
    (["not", "an", "object"], ("not_fired", "recorded line not readable")),
])
def test_a_recorded_offload_line_is_read_by_the_log_parser(detail, expected):
    from cardproof.daemon.run.judge import _recorded

    canary = {"gate": "not_on_card", "detail_json": json.dumps(detail)}
    assert _recorded(canary, default_config()) == expected
    # a gate this cardproof does not know (a merged database's) is not readable either, and no crash
    assert _recorded({"gate": "gone", "detail_json": json.dumps(detail)}, default_config())[1] == \
        "recorded line not readable"


@pytest.mark.parametrize("toml, configured", [
    ('[embedding]\nurl = "http://127.0.0.1:9"\n', True),
    ('embedding = { url = "http://127.0.0.1:9" }\n', True),
    ('# an [embedding] table would go here\n', False),
    ('[[models]]\nname = "[embedding]"\n', False),
    # frozen by an older cardproof, no longer valid as a whole: its [embedding] table alone counts
    ('[embedding]\nurl = "http://127.0.0.1:9"\n[server]\napi_key = "x"\n', True),
    ('[server]\napi_key = "x"\n# [embedding]\n', False),
])
def test_the_embedding_gate_reads_the_parsed_campaign_not_its_text(toml, configured, tmp_path):
    from cardproof.daemon.gates.embedding_down import configured as is_configured
    from cardproof.daemon.campaign.frozen import from_normalised, normalised_text

    if "api_key" in toml:
        text = toml + '[[models]]\nname = "m"\n'
    elif "[[models]]" in toml:
        text = _server("llama-server").replace('[[models]]\nname = "m"\n', "") + toml
    else:
        text = toml + _server("llama-server")
    parsed = normalised_text(text)  # as the run froze it: None where it was unreadable then
    campaign = None if parsed is None else from_normalised(json.loads(parsed), text)
    assert (campaign is None) == ("api_key" in toml)
    judged = JudgedRun(None, {}, {}, campaign, text)
    assert is_configured(judged) is configured


# -- probes and contradictions --------------------------------------------------

def test_probes_and_contradiction_detectors_are_registered_by_their_modules():
    from cardproof.daemon import probes as probes_pkg
    from cardproof.daemon.probes import PROBES
    from cardproof.report import contradictions
    from cardproof.report.contradictions import DETECTORS

    assert list(PROBES) == ["tools", "thinking", "reasoning", "coding", "vision"]
    assert {p.run.__module__.rsplit(".", 1)[1] for p in PROBES.values()} == set(PROBES)
    assert _modules(probes_pkg) - {"answers", "base", "capabilities", "defects", "looping", "run", "sandbox"} == set(PROBES)
    assert list(DETECTORS) == sorted(_modules(contradictions) - {"base", "authored"})
    assert all(d.__name__ == "detect" for d in DETECTORS.values())


def test_a_registry_names_the_module_that_declares_nothing_or_a_name_twice(tmp_path, monkeypatch):
    """A throwaway package on sys.path stands in for daemon/gates: order, a missing GATE, a name twice."""
    import importlib
    import sys

    from cardproof.registry import declared

    pkg = tmp_path / "somegates"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text("")
    entry = "from cardproof.daemon.gates import Gate\nGATE = Gate({name!r}, 'd', None, order={order})\n"
    (pkg / "a_late.py").write_text(entry.format(name="late", order=20))
    (pkg / "b_early.py").write_text(entry.format(name="early", order=10))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("somegates")
    assert list(declared("somegates", module.__path__, {"base"}, "GATE", Gate)) == ["early", "late"]
    (pkg / "c_empty.py").write_text("CHECK = None\n")
    with pytest.raises(ImportError, match=r"somegates/c_empty.py defines no GATE = Gate\(...\)"):
        declared("somegates", module.__path__, {"base"}, "GATE", Gate)
    (pkg / "c_empty.py").unlink()
    (pkg / "d_twice.py").write_text(entry.format(name="early", order=30))
    with pytest.raises(ImportError, match="somegates/d_twice.py: 'early' is already registered"):
        declared("somegates", module.__path__, {"base"}, "GATE", Gate)
    for name in [m for m in sys.modules if m.startswith("somegates")]:
        monkeypatch.delitem(sys.modules, name)


# -- one list of extension points, one way to declare a plug-in ---------------------------------------

def _resolve(dotted: str):
    module, _, name = dotted.partition(":")
    return getattr(importlib.import_module(module), name)


def _import_the_product() -> None:
    """Every module of both halves imported, so every registry that exists has been built."""
    import pkgutil

    for top in ("cardproof.daemon", "cardproof.report"):
        package = importlib.import_module(top)
        for info in pkgutil.walk_packages(package.__path__, top + "."):
            importlib.import_module(info.name)


def test_every_registry_is_listed_in_extensions_and_registers_what_it_says():
    from cardproof import extensions, registry

    _import_the_product()
    listed = {d.package: d for d in extensions.DECLARED}
    built = {p for p in registry.BUILT if p.startswith("cardproof.")}  # not a test's own package
    assert built == set(listed), "list every declared() registry in cardproof/extensions.py"
    for package, point in listed.items():
        attribute, kind = registry.BUILT[package]
        assert (attribute, kind) == (point.attribute, _resolve(point.kind)), package
        entries = _resolve(point.registry)
        assert entries, f"{point.registry} registers nothing"
        folder = Path(importlib.import_module(package).__file__).parent
        declaring = {p.stem for p in folder.glob("*.py")
                     if re.search(rf"^{attribute} = ", p.read_text(), re.M)}
        assert len(declaring) == len(entries), f"{package}: modules declaring {attribute} vs entries"


def test_every_listed_point_exists_and_has_its_recipe():
    from cardproof import extensions

    architecture = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    for point in (*extensions.DECLARED, *extensions.LISTED):
        if isinstance(point, extensions.Listed):
            assert _resolve(point.where) is not None
        assert f"**{point.recipe}**" in architecture, f"docs/ARCHITECTURE.md has no recipe '{point.recipe}'"


def test_no_module_registers_itself_by_an_import_at_its_bottom():
    """The old styles are gone: no module-level import after a def or class, no registering call."""
    late = []
    for folder in ("cardproof", "daemon", "report"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            seen_def = False
            for node in parsed(path).body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    seen_def = True
                elif seen_def and isinstance(node, (ast.Import, ast.ImportFrom)):
                    late.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            text = path.read_text()
            late += [f"{path.relative_to(ROOT)}: {old}" for old in ("register_section(", "@parser(")
                     if old in text]
    assert not late, f"declare a module-level object instead (cardproof/extensions.py): {late}"
