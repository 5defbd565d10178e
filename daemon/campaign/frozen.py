"""A run's campaign as it was read when the run froze it: parsed once, stored as JSON, read back as is.

``run/record.py`` freezes a campaign's text and SHA-256 in ``campaigns`` and, beside them, the
:class:`~.model.Campaign` that text was parsed into (``campaigns.campaign_json``, a
:func:`normalised` dict). Every later reader -- the judge, the pass rules, the report's gates,
rules, expectations and conditions -- takes the run's campaign from :func:`frozen_campaign`, so
a later change of the parser never changes how an old run reads. Runs frozen before the column
existed were parsed once by the migration that added it (``store/migrations.py``); a text that
no longer parsed then has NULL, which reads as "unreadable" (None) everywhere.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any

from pydantic import TypeAdapter

from cardproof.daemon.campaign.check import CampaignError
from cardproof.daemon.campaign.tables.depth import DepthSettings
from cardproof.daemon.campaign.tables.load import LoadSettings
from cardproof.daemon.campaign.model import Campaign, parse_campaign
from cardproof.daemon.campaign.tables import SECTIONS, ModelSpec, ProbeSettings
from cardproof.daemon.gates import GateConfig
from cardproof.daemon.store import json_value
from cardproof.daemon.store.migrations import set_campaign_normaliser

#: bumped when the stored shape changes; a reader refuses a version it does not know (reads None)
VERSION = 1

#: Campaign fields that hold pydantic models, and the type each is read back as
_TYPED: dict[str, Any] = {"models": tuple[ModelSpec, ...], "probes": ProbeSettings | None,
                          "load": LoadSettings | None, "depth": DepthSettings | None}
#: not stored: the text and its hash are the row's own columns, the path says where it was read from
_ROW_FIELDS = {"text", "sha256", "path"}


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def normalised(campaign: Campaign) -> dict:
    """``campaign`` as plain JSON values: what ``campaigns.campaign_json`` holds."""
    out = {f.name: _plain(getattr(campaign, f.name)) for f in dataclasses.fields(campaign)
           if f.name not in _ROW_FIELDS}
    return {"version": VERSION, **out}


def normalised_text(text: str) -> str | None:
    """The JSON of ``text`` parsed by this cardproof; None where it does not parse."""
    try:
        return json.dumps(normalised(parse_campaign(text, "frozen campaign")))  # keys in order: rules are read in it
    except CampaignError:
        return None


@functools.cache
def _adapter(kind: Any) -> TypeAdapter:
    """One validator per type: building a TypeAdapter compiles its schema (about a millisecond), and
    a site build reads the frozen campaign of every run several times."""
    return TypeAdapter(kind)


def from_normalised(data: dict, text: str = "", sha256: str = "", path: str = "frozen campaign") -> Campaign:
    """The :class:`Campaign` a :func:`normalised` dict was made of (ValueError where it is not one)."""
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise ValueError(f"not a normalised campaign of version {VERSION}")
    values = {k: v for k, v in data.items() if k != "version"}
    for name, kind in _TYPED.items():
        values[name] = _adapter(kind).validate_python(values.get(name))
    values["gates"] = {n: GateConfig(g["threshold"], g["exclude"]) for n, g in values["gates"].items()}
    values["sections"] = {n: (values[n] if n in ("load", "depth") else
                              _adapter(SECTIONS[n][0]).validate_python(v) if n in SECTIONS else v)
                          for n, v in values["sections"].items()}
    for name in ("prompt_classes", "reasoning"):
        values[name] = tuple(values[name])
    return Campaign(text=text, sha256=sha256, path=path, **values)


def frozen_campaign(db, *, run_id: int | None = None, campaign_id: int | None = None) -> Campaign | None:
    """The campaign of a run (or a ``campaigns`` row) as it was parsed when frozen; None where it was unreadable."""
    if run_id is not None:
        row = db.execute("select c.campaign_json, c.toml_text, c.sha256 from runs r join campaigns c "
                         "on c.id = r.campaign_id where r.id = ?", [run_id]).fetchone()
    else:
        row = db.execute("select campaign_json, toml_text, sha256 from campaigns where id = ?",
                         [campaign_id]).fetchone()
    data = json_value(row[0] if row else None, dict, None)
    if data is None:
        return None
    try:
        return from_normalised(data, row[1] or "", row[2] or "")
    except (ValueError, KeyError, TypeError):  # a damaged row reads as an unreadable campaign, never a crash
        return None


# the store's migration back-fills runs frozen before the column existed, with this parser
set_campaign_normaliser(normalised_text)
