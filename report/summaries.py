"""What the cross-run pages need from each run, kept between builds.

The runs index, the home page and a run's ratio range read a little of
every run: its headline, its median per cell, its comparison's size. Built
from a full run view that costs a second per run; kept in the manifest
beside each run's fingerprint, it costs nothing for a run that did not
change, so a build after one new run reads one run's rows, not all of them.
"""

from __future__ import annotations

import bisect
import hashlib
import json
from dataclasses import asdict, dataclass, field, fields, is_dataclass

from cardproof.marks import N_
from .stats import Spread


@dataclass
class CellFigure:
    """One measured cell's decode figure, as the index and the ratio ranges read it."""

    id: int
    model: str
    prompt_class: str
    reasoning: bool
    decode: Spread | None
    unstable: bool


@dataclass
class RunSummary:
    """One run as the cross-run pages see it; ``fingerprint`` is the run's data it was made from."""

    run_id: int
    fingerprint: str
    models: list[str]
    classes: list[str]
    cells: list[CellFigure]
    headline: dict | None  # what sections/headline_short.md.j2 prints (names, ratios, agreement)

    @classmethod
    def of(cls, view: dict, fingerprint: str) -> "RunSummary":
        """The summary of a run view (``queries.run_view``)."""
        cells = [CellFigure(c["id"], c["model"], c["prompt_class"], bool(c["reasoning"]), c["decode"],
                            bool(c.get("unstable"))) for c in view["cells"]]
        return cls(view["run"]["id"], fingerprint, [m["name"] for m in view["models"]], list(view["classes"]),
                   cells, _slim_headline(view["headline"]))

    def to_json(self) -> dict:
        # a summary read from the manifest goes back as it came: dataclasses.asdict of a thousand
        # unchanged runs cost 3.4 s of a 25 s build after one new run at 1,000 runs
        return self.__dict__.get("_json") or asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "RunSummary":
        """The summary as the manifest keeps it. Its cells are made when first read (``cells``,
        ``cell``): a build after one new run reads the cells of a few of a year of runs."""
        # checked now, made later: a damaged manifest is read as no summary here (the run is read again),
        # never an error when a page reads a cell
        if not _cells_shape(data.get("cells")):
            raise ValueError("cells")
        made = _KeptSummary(**(data | {"cells": None}))
        made.__dict__["_json"] = data
        return made

    def to_line(self) -> str:
        """The summary as one line of the manifest (report/fingerprints.py): run id, digest, the small
        part (models, classes, headline) and the cells, tab-separated JSON. A summary read from such a
        line goes back as it came."""
        kept = self.__dict__.get("_line")
        if kept is not None:
            return kept
        if "_again" in self.__dict__:
            return self._line_again()
        data = self.to_json()
        small = json.dumps({k: v for k, v in data.items() if k != "cells"}, sort_keys=True, separators=(",", ":"))
        body = small + "\t" + json.dumps(data["cells"], sort_keys=True, separators=(",", ":"))
        return f"{int(self.run_id)}\t{_digest(body)}\t{body}"

    @classmethod
    def from_line(cls, line: str, again=None) -> "RunSummary":
        """The summary of a manifest line (``to_line``); ValueError where the line is not whole (its
        digest differs) or its small part is not a summary's. Its cells are read when first needed.
        ``again()``: the line once more (``fingerprints.StoredLine.text``), where it is not to be held."""
        parts = line.split("\t")
        if len(parts) != 4 or _digest(parts[2] + "\t" + parts[3]) != parts[1]:
            raise ValueError("damaged line")
        data = json.loads(parts[2])
        if type(data) is not dict or data.keys() != _SMALL_KEYS or str(data["run_id"]) != parts[0]:
            raise ValueError("not a summary")
        made = _KeptSummary(**data, cells=None)
        if again is None:
            made.__dict__["_line"] = line  # its cells are the line's last part
        else:
            made.__dict__["_again"] = (again, parts[1])  # read again, and checked to be the same, when needed
        return made

    def cell(self, model: str, prompt_class: str, reasoning: bool) -> CellFigure | None:
        return self._by_key.get((model, prompt_class, reasoning))

    @property
    def _by_key(self) -> dict:
        if "_keys" not in self.__dict__:
            self.__dict__["_keys"] = {(c.model, c.prompt_class, c.reasoning): c for c in self.cells}
        return self.__dict__["_keys"]


_CELL_KEYS = {f.name for f in fields(CellFigure)}
_SPREAD_KEYS = {f.name for f in fields(Spread)} if is_dataclass(Spread) else set(Spread._fields)


_SMALL_KEYS = {f.name for f in fields(RunSummary)} - {"cells"}


def _cells_shape(cells) -> bool:
    return isinstance(cells, list) and all(
        type(c) is dict and c.keys() == _CELL_KEYS
        and (c["decode"] is None or (type(c["decode"]) is dict and c["decode"].keys() == _SPREAD_KEYS))
        for c in cells)


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


class _KeptSummary(RunSummary):
    """A ``RunSummary`` read from the manifest: its cells are made from their JSON when first read."""

    @property
    def cells(self) -> list[CellFigure]:
        made = self.__dict__.get("_cells")
        if made is None:
            if "_json" in self.__dict__:  # read from a manifest of the older layout
                raw = self.__dict__["_json"]["cells"]
            else:
                raw = json.loads((self.__dict__.get("_line") or self._line_again()).split("\t", 3)[3])
            if not _cells_shape(raw):  # a whole line (its digest matched) that this code did not write
                raise ValueError(f"the manifest's summary of run {self.run_id} has cells of another shape")
            made = self.__dict__["_cells"] = [
                CellFigure(**(c | {"decode": Spread(**c["decode"]) if c["decode"] else None})) for c in raw]
        return made

    def _line_again(self) -> str:
        again, digest = self.__dict__["_again"]
        line = again()
        parts = line.split("\t")
        if len(parts) != 4 or parts[1] != digest or _digest(parts[2] + "\t" + parts[3]) != digest:
            raise ValueError(f"the manifest's summary of run {self.run_id} changed during the build")
        return line

    @cells.setter
    def cells(self, value) -> None:
        if value is not None:
            self.__dict__["_cells"] = value


def _named(model: dict | None) -> dict | None:
    return {"name": model["name"], "pinned": bool(model.get("pinned"))} if model else None


def _slim_row(row: dict) -> dict:
    return {"cls": row["cls"], "best": _named(row["best"]), "other": _named(row.get("other")),
            "measurable": row.get("measurable"), "ratio": row.get("ratio"), "ratio_low": row.get("ratio_low"),
            "ratio_high": row.get("ratio_high")}


def _slim_headline(h: dict | None) -> dict | None:
    """The headline without its cells: the names, ratios and agreement the index prints."""
    if not h:
        return None
    return _slim_row(h) | {"agree": h["agree"], "rows": [_slim_row(r) for r in h["rows"]]}


@dataclass
class ComparisonSummary:
    """A comparison as the index lists it: which runs, how many comparable cells, the median deviation."""

    a: dict
    b: dict
    n_rows: int
    median_deviation: float | None
    key: str = field(default="", compare=False)

    @property
    def rows(self) -> range:
        """The index prints ``rows | length`` and tests ``if rows``: a range of that length does both."""
        return range(self.n_rows)

    @classmethod
    def of(cls, cmp: dict, key: str) -> "ComparisonSummary":
        return cls({"id": cmp["a"]["id"]}, {"id": cmp["b"]["id"]}, len(cmp["rows"]), cmp["median_deviation"], key)

    def to_json(self) -> dict:
        return {"a": self.a["id"], "b": self.b["id"], "n_rows": self.n_rows,
                "median_deviation": self.median_deviation}

    @classmethod
    def from_json(cls, data: dict, key: str) -> "ComparisonSummary":
        return cls({"id": data["a"]}, {"id": data["b"]}, data["n_rows"], data["median_deviation"], key)


def model_figures(summary: RunSummary) -> dict:
    """Per model: its figure per prompt class, by the headline's rule (reasoning off where measured)."""
    from .views import ClassFigure

    out = {}
    for name in summary.models:
        per_class = []
        for cls in summary.classes:
            c = summary.cell(name, cls, False) or summary.cell(name, cls, True)
            if c:
                per_class.append(ClassFigure(cls, c.decode, c.id, c.unstable))
        out[name] = per_class
    return out


def ratio_range(runs: list[dict], summaries: dict[int, RunSummary], upto: dict, model_a: str, model_b: str,
                prompt_class: str) -> dict | None:
    """Decode ratio A/B over the finished runs of ``upto``'s campaign up to and including ``upto``.

    ``runs`` newest first (``queries.runs``). The range stops at the run the
    article is about, so a later run never changes an article already
    published, and adding a run re-renders only that run's article.
    """
    ratios = []
    until = (upto["started_at"] or "", upto["id"])
    for r in runs:
        if r["campaign_name"] != upto["campaign_name"] or r["status"] != "completed":
            continue
        if (r["started_at"] or "", r["id"]) > until:
            continue
        s = summaries.get(r["id"])
        if s is None:  # not read yet: a damaged start time sorts it apart
            continue
        a, b = s.cell(model_a, prompt_class, False), s.cell(model_b, prompt_class, False)
        if a and b and a.decode and b.decode:
            ratios.append((r["id"], a.decode.median / b.decode.median))
    if not ratios:
        return None
    vals = [x for _, x in ratios]
    return {"runs": [i for i, _ in ratios], "low": min(vals), "high": max(vals), "n": len(vals)}


def previous_runs(runs: list[dict]) -> dict[int, int | None]:
    """Per run id, the latest earlier finished run of the same campaign name (``compare.previous_run``'s rule).

    From the list already read, in one pass per campaign instead of one
    query per run. Only runs stored as completed compare, on either side.
    """
    out: dict[int, int | None] = {}
    by_campaign: dict[str, list[dict]] = {}
    for r in runs:
        by_campaign.setdefault(r["campaign_name"], []).append(r)
    for group in by_campaign.values():
        done = sorted((r for r in group if r.get("stored_status", r["status"]) == "completed"
                       and r["started_at"] is not None), key=lambda r: (r["started_at"], r["id"]))
        starts = [d["started_at"] for d in done]
        for r in group:
            out[r["id"]] = None
            if r["status"] != "completed" or r["started_at"] is None:
                continue
            i = bisect.bisect_left(starts, r["started_at"])  # the runs before i started earlier
            out[r["id"]] = done[i - 1]["id"] if i else None
    return out


def no_headline_reason(summary: RunSummary) -> str | None:
    """Why a finished run states no headline, as a catalogue message; None where it states one.

    The index said only "—", which read as missing data where the run had measured every cell.
    """
    if summary.headline:
        return None
    if len(summary.models) < 2:
        return N_("one model: nothing to compare")
    # the cells the headline compares: per model and class, reasoning off where measured (findings.headline)
    chosen = [summary.cell(m, cls, False) or summary.cell(m, cls, True)
              for m in summary.models for cls in summary.classes]
    measured = [c for c in chosen if c is not None and c.decode is not None]
    if measured and all(c.unstable for c in measured):
        return N_("every cell unstable: no headline")
    return None
