"""The demo's ladder probed once on a real server, replayed: real answers without a server in the test.

tests/fixtures/probe_ladder.json holds every probe request the demo's probes
(tools, thinking, reasoning, coding; temperature 0, seed 1234, ``max_tokens``
160) sent to SmolLM2-135M-Instruct at Q4_1, Q8_0 and F16 on a real
llama-server (router mode), with the server's answer, its ``/props`` and its
``/tokenize`` counts. :class:`Replay` answers the same requests with them, so
the probes judge real answers and the report reads real verdicts; a request
the recording does not hold fails loudly (the probe's question changed: record
again with the real model).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from cardproof.daemon.campaign.frozen import normalised_text
from cardproof.daemon.backends import OpenAICompatBackend
from cardproof.daemon.campaign.model import ProbeSettings
from cardproof.daemon.run.probes import run_model_probes
from cardproof.daemon.store import open_store

FIXTURE = Path(__file__).parent / "fixtures" / "probe_ladder.json"
RECORDING = json.loads(FIXTURE.read_text())
LADDER = tuple(RECORDING["models"])  # smollm2-q4_1, smollm2-q8_0, smollm2-f16

CAMPAIGN = """[campaign]
name = "probe-ladder"
prompt_classes = ["short"]

[server]
backend = "llama-server"
url = "http://127.0.0.1:9"

[[models]]
name = "smollm2-q4_1"

[[models]]
name = "smollm2-q8_0"
requantized_from = "smollm2-q4_1"

[[models]]
name = "smollm2-f16"
requantized_from = "smollm2-q4_1"
pinned = true
"""


def _key(body: dict) -> str:
    return json.dumps({"messages": body.get("messages"), "tools": body.get("tools")}, sort_keys=True)


class Replay(OpenAICompatBackend):
    """A llama-server that answers from the recording of one model (nothing is sent anywhere)."""

    kind = "llama-server"

    def __init__(self, model: str):
        super().__init__("http://127.0.0.1:9")
        self.recorded = RECORDING["models"][model]
        self.answers = {_key(e["request"]): e["response"] for e in self.recorded["exchanges"]}
        self.bodies: list[dict] = []

    def chat_raw(self, model, body, *, timeout_s=None):
        self.bodies.append(body)
        try:
            return self.answers[_key(body)]
        except KeyError:
            raise AssertionError(f"the recording holds no answer of {model} to {body['messages'][-1]['content'][:80]!r}: "
                                 "a probe's question changed, record the ladder again") from None

    def server_info(self, model=None):
        return dict(self.recorded["props"])

    def count_tokens(self, model, text):
        return self.recorded["tokens"].get(text)


def ladder_store(path: Path, probes=("tools", "thinking", "reasoning", "coding"), max_tokens: int = 160):
    """A real SQLite store holding one run whose probes judged the recorded ladder: (store, run_id)."""
    store = open_store(path)
    cid = store.insert("campaigns", {"name": "probe-ladder", "sha256": "0" * 64, "toml_text": CAMPAIGN,
                                     "campaign_json": normalised_text(CAMPAIGN),
                                     "registered_at": "2026-12-06T10:00:00+00:00"})
    run_id = store.insert("runs", {"campaign_id": cid, "status": "completed", "started_at": "2026-12-06T10:00:01+00:00",
                                   "ended_at": "2026-12-06T10:20:00+00:00"})
    campaign = SimpleNamespace(probes=ProbeSettings(run=tuple(probes), repeat=1, max_tokens=max_tokens))
    for model in LADDER:
        model_id = store.insert("models", {"name": model, "digest": model})
        run_model_probes(store, Replay(model), campaign, run_id, model, model_id, echo=lambda _: None)
    return store, run_id
