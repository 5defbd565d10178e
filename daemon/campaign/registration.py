"""Pre-registration: a campaign's text, SHA-256 and time frozen before any run measures it.

``cardproof register`` stores them; ``cardproof run`` of a file with the same
hash links the run to the earliest such registration. A run with no earlier
registration is "registered at run start", and the article says so plainly.
"""

from __future__ import annotations

from cardproof.daemon.campaign.model import Campaign
from cardproof.daemon.store import Store, utcnow


def register(store: Store, campaign: Campaign) -> tuple[dict, bool]:
    """Freeze ``campaign``; returns (the registration, whether it is new).

    Registering the same text again keeps the first registration: its time
    is the one that shows how long before a run the text stood.
    """
    known = registration_for(store.db, campaign.sha256)
    if known:
        return known, False
    rid = store.insert("registrations", {"name": campaign.name, "path": campaign.path, "sha256": campaign.sha256,
                                         "toml_text": campaign.text, "registered_at": utcnow()})
    return dict(store.db["registrations"].get(rid)), True


def registration_for(db, sha256: str, *, before: str | None = None) -> dict | None:
    """The earliest registration of this exact text (by hash), optionally made at or before ``before``."""
    if "registrations" not in db.table_names():
        return None
    sql = "select * from registrations where sha256 = ?"
    args: list = [sha256]
    if before:
        sql += " and registered_at <= ?"
        args.append(before)
    return next(iter(db.query(sql + " order by registered_at, id limit 1", args)), None)


def check_before_run(db, campaign: Campaign) -> str:
    """One line for the console before a run: registered (when), changed since, or not registered."""
    reg = registration_for(db, campaign.sha256)
    if reg:
        return f"campaign registered at {reg['registered_at']} (registration {reg['id']}, SHA-256 {campaign.sha256[:16]}…)"
    if "registrations" in db.table_names():
        other = next(iter(db.query("select * from registrations where name = ? or path = ? order by id desc limit 1",
                                   [campaign.name, campaign.path])), None)
        if other:
            return (f"warning: {campaign.path} changed since its registration {other['id']} at "
                    f"{other['registered_at']} (SHA-256 {other['sha256'][:16]}… registered, "
                    f"{campaign.sha256[:16]}… now): this run counts as registered at run start")
    return "campaign not registered before this run: it counts as registered at run start"


def link_run(store: Store, run_id: int, campaign: Campaign) -> dict | None:
    """Link a run to the registration of its exact text made before the run started; None if there is none."""
    run = store.db["runs"].get(run_id)
    reg = registration_for(store.db, campaign.sha256, before=run["started_at"])
    if reg:
        store.update("runs", run_id, {"registration_id": reg["id"]})
    return reg
