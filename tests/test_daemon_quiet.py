"""The exclusive-access window: real foreign tokens from 127.0.0.2, and the give-up record."""

from __future__ import annotations

import threading
import time

import httpx

from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.service import queue
from cardproof.daemon.service.config import parse_config
from cardproof.daemon.service.progress import Progress
from cardproof.daemon.service.quiet import (Activity, RequestsSeenSource, ServerCountersSource,
                                            compact_addresses, wait_for_quiet)
from cardproof.daemon.service.worker import execute
from cardproof.daemon.store import open_store, utcnow
from conftest import campaign_text

FOREIGN = "127.0.0.2"


class ForeignClient(threading.Thread):
    """Another client on the loopback network generating tokens until stopped (bounded)."""

    def __init__(self, url: str, model: str, *, seconds: float):
        super().__init__(daemon=True)
        self.url, self.model, self.seconds = url, model, seconds
        self.stop = threading.Event()
        self.requests = 0
        self.errors: list[str] = []

    def run(self):
        deadline = time.monotonic() + self.seconds
        with httpx.Client(transport=httpx.HTTPTransport(local_address=FOREIGN), timeout=30) as c:
            while not self.stop.is_set() and time.monotonic() < deadline:
                try:
                    # a fresh connection each time: the router may drop a kept-alive one
                    c.post(self.url + "/v1/chat/completions", headers={"Connection": "close"},
                           json={"model": self.model, "max_tokens": 8, "cache_prompt": False,
                                 "messages": [{"role": "user", "content": f"foreign {self.requests}"}]})
                    self.requests += 1
                except httpx.HTTPError as exc:
                    self.errors.append(str(exc))


def test_waits_for_quiet_and_gives_up_under_real_foreign_load(llama_server):
    url = llama_server.url
    # loaded by us before the wait: the baseline, not foreign activity
    httpx.post(url + "/v1/chat/completions", timeout=60,
               json={"model": "tiny-b", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
    src = ServerCountersSource(url)
    busy = ForeignClient(url, "tiny-b", seconds=30)
    busy.start()
    try:
        # tokens flowing before the wait starts: a 2-core CI machine can stall a first request
        deadline = time.monotonic() + 30
        while busy.requests < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        # 6 s, not 3: on a busy 2-core machine one foreign request can take seconds, and its tokens reach
        # the server's counters only when it completes (seen once in CI: busy at 15 polls, 0 tokens in 3 s)
        res = wait_for_quiet([src], quiet_s=1.0, give_up_s=6.0, poll_s=0.2)
    finally:
        busy.stop.set()
        busy.join(30)
    assert res.outcome == "gave_up" and res.total.tokens > 0
    assert res.reason.startswith("no quiet gap of 1 s in 6 s: ")
    assert "foreign tokens per minute (server counters; they name no client)" in res.reason
    assert busy.requests > 0

    # a burst of foreign requests that ends: the wait ends one quiet period after it
    burst = ForeignClient(url, "tiny-b", seconds=1.0)
    t0 = time.monotonic()
    burst.start()
    res = wait_for_quiet([src], quiet_s=1.0, give_up_s=20, poll_s=0.1)
    burst.join(30)
    assert res.outcome == "quiet", res.reason
    assert res.total.tokens > 0 and time.monotonic() - t0 >= 2.0
    src.close()


def test_no_model_is_loaded_by_looking(llama_server):
    """/metrics?model=X loads X in router mode: the source must only ask loaded models."""
    url = llama_server.url
    for m in httpx.get(url + "/models", timeout=10).json()["data"]:
        if m["status"]["value"] == "loaded":
            httpx.post(url + "/models/unload", json={"model": m["id"]}, timeout=30)
    for _ in range(100):
        if all(m["status"]["value"] != "loaded" for m in httpx.get(url + "/models", timeout=10).json()["data"]):
            break
        time.sleep(0.05)
    src = ServerCountersSource(url)
    for _ in range(3):
        assert src.observe().loads == 0
    assert all(m["status"]["value"] == "unloaded" for m in httpx.get(url + "/models", timeout=10).json()["data"])
    src.close()


class Scripted:
    """Foreign requests per client, as the access-log table would show them."""

    name = "scripted"

    def __init__(self, clients):
        self.clients = clients

    def observe(self):
        return Activity(requests=sum(self.clients.values()), clients=dict(self.clients))


def test_give_up_is_recorded_with_a_reason_per_client_and_a_failed_block(tmp_path):
    db = tmp_path / "q.db"
    store = open_store(db)
    camp = parse_campaign(campaign_text("http://127.0.0.1:9"), "c.toml")
    queue.enqueue(store, camp, require_quiet=True)
    entry = queue.claim_next(store)
    cfg = parse_config(
        f'[daemon]\ndb = "{db}"\n[quiet]\nquiet_s = 0.4\ngive_up_s = 0.6\npoll_s = 0.1\n'
        'blocked_clients = ["192.168.1.7"]\n', "d.toml", default_db=db, default_data_dir=tmp_path)
    progress = Progress()
    res = execute(db, entry, cfg, progress, daemon_id=1,
                  sources_factory=lambda c: [Scripted({"192.168.1.5": 1, "192.168.1.7": 1})])
    assert res.status == "gave_up"
    row = store.db["daemon_queue"].get(entry.id)
    assert row["status"] == "gave_up" and row["finished_at"]
    assert row["reason"].startswith("no quiet gap of 0.4 s in 0.6 s: ")
    assert "foreign requests per minute from 192.168.1.5, .7" in row["reason"]
    assert "requests from blocked address 192.168.1.7: the block is not effective" in row["reason"]
    wait = next(store.db.query("select * from quiet_waits"))
    assert wait["outcome"] == "gave_up" and wait["foreign_requests"] >= 2 and wait["reason"] == row["reason"]
    assert '"192.168.1.7"' in wait["blocked_seen_json"] and wait["waited_s"] >= 0.6
    assert store.db["runs"].count == 0  # nothing was measured under contention


def test_requests_seen_source_counts_foreign_clients_only(tmp_path):
    store = open_store(tmp_path / "r.db")
    store.insert("requests_seen", {"client": "10.0.0.1", "ts": utcnow(), "path": "/v1/chat/completions"})
    src = RequestsSeenSource(store.path, own_clients=("127.0.0.1",))
    assert src.observe().requests == 0  # rows from before the source existed are the past
    for client in ("127.0.0.1", "10.0.0.9", "10.0.0.9", "10.0.1.2"):
        store.insert("requests_seen", {"client": client, "ts": utcnow(), "path": "/v1/chat/completions"})
    act = src.observe()
    assert act.requests == 3 and act.clients == {"10.0.0.9": 2, "10.0.1.2": 1}
    assert src.observe().requests == 0
    src.close()
    assert compact_addresses(["192.168.1.7", "192.168.1.5", "10.0.0.1", "::1"]) == "10.0.0.1, 192.168.1.5, .7, ::1"


def test_fake_clock_bounds_the_wait():
    t = [0.0]
    res = wait_for_quiet([Scripted({"10.1.1.1": 1})], quiet_s=300, give_up_s=7200, poll_s=5,
                         clock=lambda: t[0], sleep=lambda s: t.__setitem__(0, t[0] + s))
    assert res.outcome == "gave_up" and res.waited_s == 7200
    assert res.reason == "no quiet gap of 300 s in 2 h: 12 foreign requests per minute from 10.1.1.1"
    assert len(res.per_minute) == 120
