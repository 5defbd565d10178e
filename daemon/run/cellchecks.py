"""What is observed around each cell: the server's counters and the embedding probe.

Snapshots of ``/metrics`` before and after a cell tell how many tokens the
server generated in between; whatever exceeds our own samples was generated
for someone else (the ``foreign_load`` gate). The embedding endpoint, when a
campaign names one, is probed at the same two moments (``embedding_down``).
The machine's CPU time (``hostload.reading``) is read innermost, after the
other checks before the cell and ahead of them after it, so that the window
the ``busy_host`` gate judges holds the cell's requests and nothing of ours else.
"""

from __future__ import annotations

from cardproof.daemon.run import embedding
from cardproof.daemon.host import load as hostload
from cardproof.daemon.backends import BackendError
from cardproof.daemon.store import Store, dumps, utcnow


def snapshot(store: Store, backend, cell_id: int, model: str, phase: str, *, embedding_url: str | None,
             embedding_model: str | None) -> None:
    """Store the metrics (and embedding probe) and the machine's CPU time for ``cell_id`` at ``phase``."""
    if phase == "after":
        _host(store, backend, cell_id, phase)
    row = {"cell_id": cell_id, "phase": phase, "check": "metrics", "at": utcnow()}
    try:
        m = backend.metrics(model)
    except BackendError as exc:
        row.update(ok=0, error_text=exc.text)
    else:
        keep = {k: v for k, v in m.items() if k.endswith("_total") or k in ("requests_processing", "requests_deferred")}
        row.update(ok=1, value_json=dumps(keep))
    store.insert("cell_checks", row)
    if embedding_url:
        p = embedding.probe(embedding_url, embedding_model)
        store.insert(
            "cell_checks",
            {"cell_id": cell_id, "phase": phase, "check": "embedding", "at": p["at"], "ok": int(p["ok"]),
             "value_json": dumps(p), "error_text": p.get("error")},
        )
    if phase != "after":
        _host(store, backend, cell_id, phase)


def _host(store: Store, backend, cell_id: int, phase: str) -> None:
    store.insert("cell_checks", {"cell_id": cell_id, "phase": phase, "check": "host_cpu", "at": utcnow(), "ok": 1,
                                 "value_json": dumps(hostload.reading(backend.url))})
