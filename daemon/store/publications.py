"""Publications: the one write the publish side makes into the store, made here.

``cardproof publish`` records what every finished run's article stated (report/addenda.py builds the
rows); this module writes them, so every write into the store lives in the store package.
"""

from __future__ import annotations

import sqlite_utils

from cardproof.daemon.store import json_text

#: m025: the statement kinds a publication recorded (JSON list); NULL in one made before
KINDS_COLUMN = "statement_kinds"


def insert_publication(db: sqlite_utils.Database, *, published_at: str, note: str | None, version: str,
                       kinds: list[str], figures: list[dict]) -> int:
    """One ``publications`` row and its ``published_figures`` (each a dict without ``publication_id``), in
    one transaction; returns the publication's id."""
    pub = {"published_at": published_at, "note": note, "cardproof_version": version}
    if KINDS_COLUMN in db["publications"].columns_dict:
        pub[KINDS_COLUMN] = json_text(sorted(kinds))
    with db.conn:
        pub_id = db["publications"].insert(pub).last_pk
        db["published_figures"].insert_all([r | {"publication_id": pub_id} for r in figures])
    return pub_id
