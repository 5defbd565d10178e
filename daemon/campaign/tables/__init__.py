"""The campaign file as pydantic models: one model per TOML table, one registry of tables.

Every value is checked by ``validate`` (as ``Annotated`` validators, so
nothing is coerced) and every model forbids keys it does not declare. What
needs two tables at once (a prompt class named in ``[campaign]`` but defined
under ``[prompts]``, a rule naming a probe) is checked in ``campaign.py``
after the models have read the file (``campaign/model.py``).

The built-in tables are declared here. Adding a table is adding one module to this package that
declares ``TABLE = Table(name, Model, default, order)`` (``campaign/schema.py``); the parsed value is
in ``Campaign.sections[name]``. A table no module declares is refused as an unknown key, like any
misspelt one. ``[load]`` and ``[depth]`` (``load.py``, ``depth.py``) are declared this way; what they
need from other tables is checked in ``campaign/model.py``.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, create_model, model_validator

from cardproof.daemon.campaign import validate
from cardproof.daemon.backends import BACKENDS, taking
from cardproof.daemon.campaign.check import (MAX_CODE_TIMEOUT_S, MAX_GATE_THRESHOLD, MAX_MODELS, MAX_NUM_CTX,
                                             MAX_PROBE_REPEAT, MAX_PROMPT_CLASSES, MAX_REPETITIONS,
                                             MAX_REQUEST_TIMEOUT_S, MAX_RULES, MAX_TOKENS, NAME_CHARS,
                                             ReportSettings, class_name)
from cardproof.daemon.gates import GATES
from cardproof.daemon.probes import PROBES
from cardproof.daemon.campaign.schema import Section, Table
from cardproof.registry import declared

Name = validate.Name(NAME_CHARS)


class CampaignSettings(Section):
    """``[campaign]``: what is measured, how often."""

    name: Name | None = None  # unset: the file name stands in (campaign.py)
    prompt_classes: Annotated[tuple[str, ...], BeforeValidator(validate.distinct("prompt class"))] = \
        ("short", "medium", "long")
    reasoning: Annotated[tuple[bool, ...], BeforeValidator(lambda v: _reasoning(v))] = (False,)
    repetitions: validate.Int(1, MAX_REPETITIONS) = 5
    repetitions_reasoning: validate.Int(1, MAX_REPETITIONS) = 3
    max_tokens: validate.Int(1, MAX_TOKENS) = 128
    canaries: validate.Bool = False


def _reasoning(value: Any) -> tuple[bool, ...]:
    """true, false or a list of them; repeats folded, order kept."""
    items = [value] if isinstance(value, bool) else value
    if not isinstance(items, list) or not items or not all(isinstance(r, bool) for r in items):
        raise validate.Invalid(f"expected true, false or a list of them, got {validate.describe(value)}")
    return tuple(dict.fromkeys(items))


def _backend(value: Any) -> str:
    # read at check time: a backend registered later (or in a test) is a valid name
    if not isinstance(value, str) or value not in BACKENDS:  # a TOML table or list is unhashable
        raise validate.Invalid(f"expected one of {', '.join(BACKENDS)}, got {validate.describe(value)}")
    return value


class ServerSettings(Section):
    """``[server]``: which server, where, and what the backend is given."""

    backend: validate.checked(_backend, str) = "llama-server"
    url: validate.HttpUrl = Field(description="an http:// or https:// URL")
    log_file: validate.FilePath | None = None
    journal_unit: validate.UnitName | None = None
    request_timeout_s: validate.Number(0, MAX_REQUEST_TIMEOUT_S, above=True) = 300.0
    num_ctx: validate.Int(1, MAX_NUM_CTX) | None = None
    api_key_env: validate.EnvName | None = None

    @model_validator(mode="after")
    def _options_of_the_backend(self):
        # the backend registry says which options each kind takes
        if self.num_ctx and "num_ctx" not in BACKENDS[self.backend].options:
            raise validate.Invalid(f"only the {' and '.join(taking('num_ctx'))} backend takes num_ctx "
                                   f"(backend is {self.backend!r})", at=("num_ctx",))
        return self


class ModelSpec(Section):
    """One ``[[models]]`` table."""

    name: Name = Field(description="a model name")
    file: validate.FilePath | None = None
    pinned: validate.Bool = False
    # another model of the campaign this file was requantized from (llama-quantize --allow-requantize):
    # it carries that model's weights, so the article states no quality difference between them
    requantized_from: Name | None = None


def _model_tables(value: Any) -> list:
    if not isinstance(value, list) or not value:
        raise validate.Invalid("expected at least one [[models]] table")
    if len(value) > MAX_MODELS:
        raise validate.Invalid(f"expected at most {MAX_MODELS:,} [[models]] tables, got {len(value):,}")
    return value


def _distinct_models(models: tuple[ModelSpec, ...]) -> tuple[ModelSpec, ...]:
    seen: set[str] = set()
    for i, m in enumerate(models):
        if m.name in seen:
            raise validate.Invalid(f"duplicate model name {validate.quoted(m.name)}", at=(i, "name"))
        seen.add(m.name)
    if sum(m.pinned for m in models) > 1:
        raise validate.Invalid("at most one model may be pinned")
    return models


class PromptClass(Section):
    """``[prompts.<class>]``: a prompt class of its own, or a built-in one resized."""

    target_tokens: validate.Int(1, MAX_TOKENS) = Field(description=f"an integer from 1 to {MAX_TOKENS:,}")


class EmbeddingSettings(Section):
    """``[embedding]``: an embedding endpoint probed around each cell (the ``embedding_down`` gate)."""

    url: validate.HttpUrl | None = None
    model: Name | None = None

    @model_validator(mode="after")
    def _url_with_a_model(self):
        if self.model is not None and self.url is None:
            raise validate.Invalid("missing (expected an http:// or https:// URL)", at=("url",))
        return self


class ProbeSettings(Section):
    """``[probes]``: which probes run on every model, how often, within which limits."""

    run: Annotated[tuple[str, ...], BeforeValidator(validate.distinct("probe", lambda: PROBES))] = tuple(PROBES)
    repeat: validate.Int(1, MAX_PROBE_REPEAT) = 2  # attempts on identical input; 1 leaves stability unchecked
    max_tokens: validate.Int(1, MAX_TOKENS) = 1024
    reasoning: validate.Bool = False  # thinking switch for all probes but `thinking` (always on)
    code_timeout_s: validate.Number(0, MAX_CODE_TIMEOUT_S, above=True) = 10.0


class GateSettings(Section):
    """``[gates.<gate>]``: a gate's threshold and whether it excludes samples (unset: the gate's default)."""

    threshold: validate.Number(0, MAX_GATE_THRESHOLD) | None = None
    exclude: validate.Bool | None = None


def _gates_model() -> type[Section]:
    """``[gates]``: one optional table per registered gate, nothing else."""
    return create_model("GatesSettings", __base__=Section, **{g: (GateSettings | None, None) for g in GATES})


def _rule_name(value: Any) -> str:
    try:
        return validate.name(value, max_chars=NAME_CHARS)
    except validate.Invalid as exc:
        raise validate.Invalid(f"rule name: {exc}") from None


def _rule_text(value: Any) -> str:
    # a TOML multi-line string may hold tab and newline, nothing else below U+0020
    return validate.text(value, what="a rule as a non-empty string", max_chars=4000, allow="\t\n\r")


Models = Annotated[tuple[ModelSpec, ...], BeforeValidator(_model_tables), AfterValidator(_distinct_models)]
Prompts = Annotated[dict[validate.checked(class_name, str), PromptClass],
                    BeforeValidator(validate.table("prompt classes", MAX_PROMPT_CLASSES))]
Rules = Annotated[dict[validate.checked(_rule_name, str), validate.checked(_rule_text, str)],
                  BeforeValidator(validate.table("rules", MAX_RULES))]

#: table name -> (type, default); in the order problems are looked for. ``...``: required.
SECTIONS: dict[str, tuple[Any, Any]] = {
    "campaign": (CampaignSettings, CampaignSettings()),
    "server": (ServerSettings, Field(description="a table with backend and url")),
    "models": (Models, Field(description="at least one [[models]] table")),
    "prompts": (Prompts, {}),
    "embedding": (EmbeddingSettings, EmbeddingSettings()),
    "probes": (ProbeSettings | None, None),
    "report": (ReportSettings, ReportSettings()),
    "gates": (None, None),  # built from GATES when the model is built
    "rules": (Rules, {}),
    "expectations": (Rules, {}),  # what the author believes before measuring, in the rule language
}
_BUILT_IN = frozenset(SECTIONS)


def add_table(table: Table) -> None:
    """Accept the table ``[table.name]`` of a campaign, read as ``table.model`` (a :class:`~.schema.Section`).

    Called for every ``TABLE`` of this package's modules. The parsed table (``default`` where the file
    has none) is in ``Campaign.sections[name]``. A built-in name is refused: a module cannot change
    what an existing table means.
    """
    name, kind, default = table.name, table.model, table.default
    if name in _BUILT_IN:
        raise ValueError(f"[{name}] is a built-in campaign table")
    if not name.isidentifier() or hasattr(Section, name):  # a field name that pydantic's own names leave free
        raise ValueError(f"[{name}] cannot be a campaign table name (a Python identifier not used by pydantic)")
    SECTIONS[name] = (kind | None if default is None else kind, default)
    _model_cache.clear()


_model_cache: dict[tuple, type[Section]] = {}


def campaign_model(only: tuple[str, ...] | None = None) -> type[Section]:
    """The model of a whole campaign file (or of the tables ``only``), built from :data:`SECTIONS`."""
    names = tuple(SECTIONS) if only is None else only
    key = (names, tuple(GATES))
    if key not in _model_cache:
        fields = {n: (_gates_model(), None) if n == "gates" else SECTIONS[n] for n in names}
        if "gates" in fields:
            fields["gates"] = (fields["gates"][0], fields["gates"][0]())
        _model_cache[key] = create_model("CampaignFile", __base__=Section, **fields)
    return _model_cache[key]


def registered() -> list[str]:
    """The tables declared by this package's modules, in ``Table.order``."""
    return [n for n in SECTIONS if n not in _BUILT_IN]


#: name -> Table of every module here (``[fit]``, ``[variants]``, ``[quality]``, ``[load]``, ``[depth]`` ...)
TABLES: dict[str, Table] = declared(__name__, __path__, set(), "TABLE", Table)
for _table in TABLES.values():
    add_table(_table)
