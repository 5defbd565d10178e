"""A stored run's campaign, taken again from the text frozen with it, for ``cardproof rerun``.

The text is the one the run's SHA-256 was taken of; a text that no longer
matches its hash (edited in the store) is refused, since a rerun of it would
not be a rerun. Whether the campaign's server answers is asked before anything
is stored, so a rerun against a server that is not up leaves no failed run.
"""

from __future__ import annotations

import hashlib

from cardproof.daemon.backends import BackendError, backend_for
from cardproof.daemon.campaign.model import Campaign, parse_campaign
from cardproof.daemon.store.redact import public_url


class RerunError(Exception):
    """The run cannot be taken again (no such run, a frozen text that fails its hash, no server)."""


def frozen_campaign(db, run_id: int) -> dict:
    """``text``, ``path``, ``sha256`` and ``name`` of the campaign frozen with run ``run_id``."""
    row = db.execute("select c.toml_text, c.path, c.sha256, c.name from runs r join campaigns c on c.id = r.campaign_id "
                     "where r.id = ?", [run_id]).fetchone()
    if row is None:
        raise RerunError(f"no run {run_id}")
    text, path, sha, name = row
    if not isinstance(text, str) or hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest() != sha:
        raise RerunError(f"run {run_id}: the stored campaign text does not match its SHA-256 {str(sha)[:16]}…; "
                         "a rerun of it would not be the same campaign")
    return {"text": text, "path": path or f"campaign-of-run-{run_id}.toml", "sha256": sha, "name": name}


def campaign_of(db, run_id: int) -> Campaign:
    """The frozen campaign parsed as it was run (a ``CampaignError`` where today's cardproof refuses it)."""
    frozen = frozen_campaign(db, run_id)
    return parse_campaign(frozen["text"], frozen["path"])


def check_server(campaign: Campaign) -> None:
    """Raise ``RerunError`` unless the campaign's server answers."""
    backend = backend_for(campaign)
    try:
        backend.server_info()
    except BackendError as exc:
        raise RerunError(f"the campaign's server {public_url(campaign.url)} does not answer ({exc}): start it as the "
                         "article's Setup section shows, or take the campaign text with --print") from exc
    finally:
        backend.close()
