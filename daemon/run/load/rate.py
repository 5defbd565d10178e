"""Rate steps: requests sent at Poisson arrival times, whether or not earlier ones were answered.

Open loop: a dispatcher thread sends each request when the seeded schedule
(:mod:`arrivals`) says, in a thread of its own, so a slow server makes
requests pile up instead of slowing the arrivals -- the queue a real user
population would build. Each request records when it was due, when it was
sent and how many requests were in flight then (itself included). As in
the stream steps the main thread alone writes to the store; a failed request
(a server killed mid-step included) is an exception sample and the sweep
goes on with its next step.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Callable

from cardproof.daemon.backends import Backend
from cardproof.daemon.server.prompts import build_prompt
from cardproof.daemon.run.sampling import SampleRequest, send
from cardproof.daemon.store import Store, utcnow
from cardproof.daemon.campaign.tables.load import MAX_STREAMS, LoadSettings
from cardproof.daemon.run.load.steps import ServerShape, new_step, step_client, store_request

#: requests of one rate step in flight at once at most (one thread each); an arrival beyond it is sent
#: late, and its ``sent_s`` against ``scheduled_s`` shows by how much
MAX_IN_FLIGHT = MAX_STREAMS


def run_rate_step(store: Store, backend: Backend, *, run_id: int, model: str, model_id: int, pinned: bool,
                  load_id: int | None, rate_rps: float, settings: LoadSettings, prompt_tokens: int,
                  shape: ServerShape, counted: Callable[[bool], None]) -> dict:
    """One step at ``rate_rps`` offered requests per second; ``counted(ok)`` is called per stored sample."""
    schedule = settings.rate_schedule(rate_rps)
    total = len(schedule)
    step = new_step(store, run_id, model_id, "rate", pinned=pinned, prompt_class=settings.prompt_class,
                    max_tokens=settings.max_tokens, requests=total, shape=shape, streams=None,
                    rate={"rate_rps": rate_rps, "seed": settings.seed, "duration_s": settings.duration_s})
    results: queue.Queue = queue.Queue()
    stop = threading.Event()
    lock = threading.Lock()
    room = threading.BoundedSemaphore(MAX_IN_FLIGHT)
    flying = [0]
    senders: list[threading.Thread] = []
    client = step_client(backend, min(total, MAX_IN_FLIGHT))

    def one(i: int, due: float) -> None:
        try:
            with lock:  # the send time as this thread starts the request: what the wire sees, thread start included
                arrival = {"scheduled_s": due, "sent_s": time.perf_counter() - t0, "in_flight": flying[0]}
            req = SampleRequest(run_id, step["cell_id"], model_id, model, i,
                                lambda nonce: build_prompt(prompt_tokens, nonce), settings.max_tokens, False,
                                kind="rate", client=client, load_id=load_id)
            sent = send(backend, req)
            results.put((sent, arrival, time.perf_counter()))
        finally:
            with lock:
                flying[0] -= 1
            room.release()

    def dispatch() -> None:
        for i, due in enumerate(schedule, 1):
            wait = t0 + due - time.perf_counter()
            if (stop.wait(wait) if wait > 0 else stop.is_set()):
                return
            while not room.acquire(timeout=0.2):
                if stop.is_set():
                    return
            with lock:
                flying[0] += 1
            t = threading.Thread(target=one, args=(i, due), daemon=True, name=f"cardproof-rate-{i}")
            senders.append(t)
            t.start()

    dispatcher = threading.Thread(target=dispatch, daemon=True, name="cardproof-rate-dispatch")
    t0 = time.perf_counter()
    last = t0
    stored = 0
    max_in_flight = 0
    try:
        dispatcher.start()
        while stored < total:
            try:
                sent, arrival, at = results.get(timeout=0.5)
            except queue.Empty:
                if not dispatcher.is_alive() and not any(t.is_alive() for t in list(senders)) and results.empty():
                    break  # a sender died without an answer: what it owed is missing, not invented
                continue
            last = max(last, at)
            max_in_flight = max(max_in_flight, arrival["in_flight"])
            counted(store_request(store, step["id"], None, sent, arrival).ok)
            stored += 1
    finally:
        stop.set()  # an interrupt: nothing more is sent
        deadline = None if stored >= total else time.monotonic() + 2.0
        for t in [dispatcher, *list(senders)]:
            t.join(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
        client.close()
    wall_s = last - t0
    update = {"ended_at": utcnow(), "wall_s": wall_s}
    if shape.total_slots is not None:
        update["queueing"] = int(max_in_flight > shape.total_slots)  # more in flight than slots at some arrival
    store.update("load_steps", step["id"], update)
    step.update(update)
    return step
