"""pydantic glue shared by the campaign and daemon-config readers: one refusal, one line.

Both files are TOML read into pydantic models declared with the checks of
``validate`` (``extra="forbid"``: an unknown key is refused, never ignored).
pydantic reports every problem it finds; a reader states the first one as
"file: key 'dotted.key[2]': expected ...", the form users already know.
"""

from __future__ import annotations

from dataclasses import dataclass

import types
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError

from cardproof.daemon.campaign.validate import describe


class Section(BaseModel):
    """A TOML table: known keys only, values checked by ``validate``, read-only once built."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Table:
    """What a module of ``campaign/tables/`` declares as ``TABLE``: the campaign table ``[name]``, read as
    ``model`` (a :class:`Section`), ``default`` where the file has none (None: absent). Tables are read,
    and their problems looked for, in ``order``; the parsed value is ``Campaign.sections[name]``."""

    name: str
    model: Any
    default: Any = None
    order: int = 0


def dotted(loc: tuple) -> str:
    """pydantic's location as the key a user reads: ``("models", 1, "name")`` -> ``models[1].name``.

    TOML keys are strings, so an int can only be a list index.
    """
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def first_problem(exc: ValidationError, model: type[BaseModel], *, section_word: str = "key") -> tuple[str, str]:
    """(dotted key, "expected ..." message) for the first error pydantic found.

    ``section_word`` names a top-level key in the "unknown ..." message
    (the daemon config says "unknown section").
    """
    err = exc.errors(include_url=False)[0]
    loc = tuple(err["loc"])
    if len(loc) >= 2 and loc[-1] == "[key]" and err.get("input") == loc[-2]:
        loc = loc[:-1]  # a refused table key is named by itself (a key spelt "[key]" is kept)
    kind = err["type"]
    error = (err.get("ctx") or {}).get("error")
    if kind in ("value_error", "assertion_error") and error is not None:
        return dotted(loc + tuple(getattr(error, "at", ()))), str(error)
    if kind == "extra_forbidden":
        allowed = ", ".join(sorted(_fields(_type_at(model, loc[:-1]))))
        word = section_word if len(loc) == 1 else "key"
        return dotted(loc), f"unknown {word} (expected one of: {allowed})"
    if kind == "missing":
        field = _fields(_type_at(model, loc[:-1])).get(loc[-1])
        what = field.description if field is not None and field.description else None
        return dotted(loc), f"missing (expected {what})" if what else "missing"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return dotted(loc), f"expected a table, got {describe(err.get('input'))}"
    # a kind no field of ours lets through (each check does its own type test): pydantic's words
    return dotted(loc), f"{err['msg']}, got {describe(err.get('input'))}"


def _fields(model: Any) -> dict:
    return model.model_fields if isinstance(model, type) and issubclass(model, BaseModel) else {}


def _type_at(model: Any, loc: tuple) -> Any:
    """The declared type at ``loc`` inside ``model``: walks fields, list items and table values."""
    t = model
    for part in loc:
        t = _bare(t)
        if isinstance(part, int):
            t = get_args(t)[0]
        elif part in _fields(t):
            t = _fields(t)[part].annotation
        else:
            args = get_args(t)
            t = args[1] if len(args) == 2 else Any
    return _bare(t)


def _bare(t: Any) -> Any:
    """``t`` without ``Annotated`` and ``| None``."""
    while True:
        origin = get_origin(t)
        if origin is Annotated:
            t = get_args(t)[0]
        elif origin in (Union, types.UnionType):
            t = next(a for a in get_args(t) if a is not type(None))
        else:
            return t
