"""Contradictions written by hand: ``notes/run-<id>.contradictions.toml``.

    [[contradiction]]
    title = { en = "...", de = "..." }
    status = "open"            # or "resolved"
    [contradiction.a]
    text = { en = "...", de = "..." }
    evidence = ["sample-12", "line-40"]
    [contradiction.b]
    text = { en = "...", de = "..." }
    evidence = ["cell-3"]
    # resolution = { en = "...", de = "..." }   (required when resolved)
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from .base import Contradiction, Side

_ANCHOR = re.compile(r"^(sample|cell|line)-\d+$")


class AuthoredError(Exception):
    """An authored contradictions file that cannot be used; names file and key."""


def path_for(project: Path, run_id: int) -> Path:
    return Path(project) / "notes" / f"run-{run_id}.contradictions.toml"


def _bilingual(value, where: str, path: Path) -> dict:
    if not isinstance(value, dict) or not all(isinstance(value.get(k), str) and value[k].strip() for k in ("en", "de")):
        raise AuthoredError(f"{path}: key '{where}': expected a table with non-empty en and de strings")
    return {"en": value["en"], "de": value["de"]}


def _side(raw, where: str, path: Path) -> Side:
    if not isinstance(raw, dict):
        raise AuthoredError(f"{path}: key '{where}': expected a table with text and evidence")
    ev = raw.get("evidence", [])
    if not isinstance(ev, list) or not all(isinstance(e, str) and _ANCHOR.match(e) for e in ev) or not ev:
        raise AuthoredError(f"{path}: key '{where}.evidence': expected a non-empty list like [\"sample-12\", \"line-40\"]")
    return Side(_bilingual(raw.get("text"), f"{where}.text", path), tuple(ev))


def load(project: Path, run_id: int) -> list[Contradiction]:
    path = path_for(project, run_id)
    if not path.exists():
        return []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise AuthoredError(f"{path}: not valid TOML: {exc}") from exc
    items = data.get("contradiction", [])
    if not isinstance(items, list):
        raise AuthoredError(f"{path}: key 'contradiction': expected [[contradiction]] tables")
    out = []
    for i, item in enumerate(items):
        where = f"contradiction[{i}]"
        status = item.get("status", "open")
        if status not in ("open", "resolved"):
            raise AuthoredError(f"{path}: key '{where}.status': expected \"open\" or \"resolved\", got {status!r}")
        resolution = {}
        if status == "resolved":
            resolution = _bilingual(item.get("resolution"), f"{where}.resolution", path)
        out.append(Contradiction(
            f"authored:{i}",
            _bilingual(item.get("title"), f"{where}.title", path),
            _side(item.get("a"), f"{where}.a", path),
            _side(item.get("b"), f"{where}.b", path),
            status, resolution, "authored",
        ))
    return out
