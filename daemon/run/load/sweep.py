"""Concurrency steps: N streams each sending requests back to back, one writer storing them.

Each request is an ordinary sample (server counters, nonce, no prompt
cache) taken by :func:`sampling.send` in a stream's thread; the main thread
alone writes to the store (a SQLite connection belongs to one thread) as
the answers arrive. A failed request -- a server killed mid-step included --
is an exception sample, and the sweep goes on with its next step.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from typing import Callable

from cardproof.daemon.backends import Backend
from cardproof.daemon.server.prompts import build_prompt
from cardproof.daemon.run.sampling import SampleRequest, send
from cardproof.daemon.store import Store, utcnow
from cardproof.daemon.campaign.tables.load import LoadSettings
from cardproof.daemon.run.load.steps import ServerShape, new_step, step_client, store_request


def run_stream_step(store: Store, backend: Backend, *, run_id: int, model: str, model_id: int, pinned: bool,
                    load_id: int | None, streams: int, settings: LoadSettings, prompt_tokens: int,
                    shape: ServerShape, counted: Callable[[bool], None]) -> dict:
    """One step of ``streams`` concurrent streams; ``counted(ok)`` is called per stored sample."""
    total = settings.requests(streams)
    step = new_step(store, run_id, model_id, "load", pinned=pinned, prompt_class=settings.prompt_class,
                    max_tokens=settings.max_tokens, requests=total, shape=shape, streams=streams)
    numbers = itertools.count(1)
    take_lock = threading.Lock()
    stop = threading.Event()
    results: queue.Queue = queue.Queue()
    client = step_client(backend, streams)

    def stream(no: int) -> None:
        while not stop.is_set():
            with take_lock:
                i = next(numbers)
            if i > total:
                return
            req = SampleRequest(run_id, step["cell_id"], model_id, model, i,
                                lambda nonce: build_prompt(prompt_tokens, nonce), settings.max_tokens, False,
                                kind="load", client=client, load_id=load_id)
            sent = send(backend, req)
            results.put((no, sent, time.perf_counter()))

    t0 = time.perf_counter()
    last = t0
    threads = [threading.Thread(target=stream, args=(no,), daemon=True, name=f"cardproof-stream-{no}")
               for no in range(1, streams + 1)]
    stored = 0
    try:
        for t in threads:
            t.start()
        while stored < total:
            try:
                no, sent, at = results.get(timeout=0.5)
            except queue.Empty:
                if not any(t.is_alive() for t in threads) and results.empty():
                    break  # a stream thread died without an answer: what it owed is missing, not invented
                continue
            last = max(last, at)
            taken = store_request(store, step["id"], no, sent)
            counted(taken.ok)
            stored += 1
    finally:
        stop.set()  # an interrupt: the streams send nothing more
        # interrupted: the streams get two seconds in all to notice, however many there are
        deadline = None if stored >= total else time.monotonic() + 2.0
        for t in threads:
            t.join(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
        client.close()
    wall_s = last - t0
    store.update("load_steps", step["id"], {"ended_at": utcnow(), "wall_s": wall_s})
    step["wall_s"] = wall_s
    return step
