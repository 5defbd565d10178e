"""Campaign files: TOML in, a validated Campaign out, or one clear error.

Every error names the file, the key (dotted: ``models[2].name``,
``gates.load_time.threshold``) and what was expected, so a user can fix the
file without reading code. Nothing is written to the store until the file
has validated completely.

Every key has a type and a range (``campaign_check`` states the limits):
numbers are finite and bounded, a bool is not a number, names carry no
control or invisible characters and no outer whitespace, paths no control
characters, URLs are parsed (http/https with a host), and model, prompt
class and probe names may not repeat. Rule texts may hold tab and newline
(a TOML multi-line string), nothing else below U+0020.

The tables are pydantic models in ``campaign_schema`` (the value checks of
``validate``, unknown keys refused); this module reads the file, states the
first problem, checks what needs two tables at once, and builds the
:class:`Campaign` the runner uses.

In short, ``campaign.py``, ``campaign_schema.py``, ``schema.py``, ``validate.py``: TOML →
validated ``Campaign``: one pydantic model per table (``extra="forbid"``), the value checks of
``campaign/validate.py`` as ``Annotated`` validators (nothing coerced; a TOML list of bounded length through
``validate.bounded_list``, the item at fault named by its index), cross-table checks in
``campaign/model.py``; ``campaign/schema.py`` turns the first problem into one line naming file and dotted key
(exit 2). The daemon config (``service/config.py``) is read the same way
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cardproof.daemon.campaign import validate
from cardproof.daemon.campaign.check import (MAX_CAMPAIGN_BYTES, MAX_NUM_CTX, MAX_PLANNED_SAMPLES, NAME_CHARS,
                                             CampaignError, check_model)
from cardproof.daemon.campaign.tables import ModelSpec, ProbeSettings, campaign_model, registered
from cardproof.daemon.gates import GateConfig, default_config
from cardproof.daemon.campaign.tables.depth import DepthSettings, planned_samples
from cardproof.daemon.campaign.tables.load import LoadSettings
from cardproof.daemon.probes import VERDICTS
from cardproof.daemon.server.prompts import PROMPT_CLASSES
from cardproof.daemon.campaign.tables.quality import check_campaign as check_quality
from cardproof.daemon.campaign.rules import RuleError, validate_rule
from cardproof.daemon.campaign.tables.variants import check_campaign as check_variants

__all__ = ["Campaign", "CampaignError", "ModelSpec", "ProbeSettings", "load_campaign", "parse_campaign",
           "parse_gates"]


@dataclass(frozen=True)
class Campaign:
    name: str
    path: str
    text: str
    sha256: str
    backend: str
    url: str
    request_timeout_s: float
    log_file: str | None
    journal_unit: str | None
    models: tuple[ModelSpec, ...]
    prompt_classes: tuple[str, ...]
    prompt_tokens: dict[str, int]
    reasoning: tuple[bool, ...]
    repetitions: int
    repetitions_reasoning: int
    max_tokens: int
    canaries: bool = False
    embedding_url: str | None = None
    embedding_model: str | None = None
    gates: dict[str, GateConfig] = field(default_factory=default_config)
    probes: ProbeSettings | None = None
    rules: dict[str, str] = field(default_factory=dict)  # name -> rule text, frozen with the campaign
    num_ctx: int | None = None  # Ollama only; unset: the server's default, recorded from /api/ps
    api_key_env: str | None = None  # the variable holding an API key; the key never enters the store
    expectations: dict[str, str] = field(default_factory=dict)  # name -> rule text: beliefs before measuring
    unstable_ratio: float = 1.5  # [report]: max/min of a cell's decode samples beyond which it states nothing
    report: dict[str, Any] = field(default_factory=dict)  # [report] as read (check.ReportSettings): the pages' limits
    sections: dict[str, Any] = field(default_factory=dict)  # the tables of campaign/tables/*.py, by name
    load: LoadSettings | None = None  # [load]: concurrency steps (daemon/run/load/)
    depth: DepthSettings | None = None  # [depth]: context-depth steps (daemon/run/load/)

    def repetitions_for(self, reasoning: bool) -> int:
        return self.repetitions_reasoning if reasoning else self.repetitions


def load_campaign(path: str | Path) -> Campaign:
    """Read and validate a campaign file; raise CampaignError naming the key."""
    p = Path(path)
    name = str(p)
    try:
        with p.open("rb") as fh:
            raw = fh.read(MAX_CAMPAIGN_BYTES + 1)
    except OSError as exc:
        raise CampaignError(name, "-", f"cannot read file: {exc.strerror}") from exc
    except ValueError as exc:  # a NUL in the path itself
        raise CampaignError(name, "-", f"cannot read file: {exc}") from exc
    if len(raw) > MAX_CAMPAIGN_BYTES:
        raise CampaignError(name, "-", f"file is larger than {MAX_CAMPAIGN_BYTES:,} bytes (a campaign is settings)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CampaignError(name, "-", f"not UTF-8 text (byte {exc.start})") from exc
    return parse_campaign(text, name)


def _toml(text: str, path: str) -> dict:
    if len(text) > MAX_CAMPAIGN_BYTES:
        raise CampaignError(path, "-", f"text is longer than {MAX_CAMPAIGN_BYTES:,} characters (a campaign is settings)")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CampaignError(path, "-", f"not valid TOML: {exc}") from exc
    except RecursionError:
        raise CampaignError(path, "-", f"not usable TOML: {validate.NESTED_TOO_DEEP}") from None


def parse_campaign(text: str, path: str = "<campaign>") -> Campaign:
    """Validate campaign TOML text; ``path`` is only used in messages."""
    data = _toml(text, path)
    f = check_model(campaign_model(), data, path)
    camp, server = f.campaign, f.server
    name = camp.name if camp.name is not None else _name_from_file(path)
    prompt_tokens = dict(PROMPT_CLASSES) | {k: v.target_tokens for k, v in f.prompts.items()}
    for i, cls in enumerate(camp.prompt_classes):
        if cls not in prompt_tokens:
            raise CampaignError(path, f"campaign.prompt_classes[{i}]", f"unknown prompt class {validate.quoted(cls)} "
                                f"(known: {', '.join(sorted(prompt_tokens))})")
    planned = len(f.models) * len(camp.prompt_classes) * sum(
        camp.repetitions_reasoning if r else camp.repetitions for r in camp.reasoning)
    if planned > MAX_PLANNED_SAMPLES:
        raise CampaignError(path, "campaign.repetitions",
                            f"the plan comes to {planned:,} samples (models x prompt classes x repetitions per "
                            f"reasoning setting); at most {MAX_PLANNED_SAMPLES:,}")
    axes = _axes(f.load, f.depth, path, prompt_tokens, camp.max_tokens, len(f.models), planned)
    planned += check_variants(getattr(f, "variants", None), path=path, backend=server.backend,
                              models=[m.name for m in f.models], classes=camp.prompt_classes,
                              prompt_tokens=prompt_tokens, max_tokens=camp.max_tokens,
                              reasoning_reps=[camp.repetitions_reasoning if r else camp.repetitions
                                              for r in camp.reasoning])
    if planned > MAX_PLANNED_SAMPLES:
        raise CampaignError(path, "variants.repetitions", f"the plan comes to {planned:,} samples with the "
                            f"variants' cells; at most {MAX_PLANNED_SAMPLES:,}")
    fit = getattr(f, "fit", None)  # [fit] names campaign models only (daemon/campaign/tables/fit.py)
    named = [(f"fit.models[{i}]", n) for i, n in enumerate(fit.models or ())] if fit is not None else []
    named += [(f"fit.per_model.{n}", n) for n in (fit.per_model if fit is not None else {})]
    for i, m in enumerate(f.models):
        if m.requantized_from is not None:
            if m.requantized_from == m.name:
                raise CampaignError(path, f"models[{i}].requantized_from", "a model cannot be made from itself")
            named.append((f"models[{i}].requantized_from", m.requantized_from))
    for key, named_model in named:  # not `name`: that is the campaign's, used below
        if named_model not in {m.name for m in f.models}:
            raise CampaignError(path, key, f"unknown model {validate.quoted(named_model)} "
                                f"(models: {', '.join(m.name for m in f.models)})")
    check_quality(getattr(f, "quality", None), path=path, models=[m.name for m in f.models],
                  variants=getattr(f, "variants", None))
    return Campaign(
        name=name,
        path=path,
        text=text,
        sha256=hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
        backend=server.backend,
        url=server.url,
        request_timeout_s=server.request_timeout_s,
        log_file=server.log_file,
        journal_unit=server.journal_unit,
        models=f.models,
        prompt_classes=camp.prompt_classes,
        prompt_tokens=prompt_tokens,
        reasoning=camp.reasoning,
        repetitions=camp.repetitions,
        repetitions_reasoning=camp.repetitions_reasoning,
        max_tokens=camp.max_tokens,
        canaries=camp.canaries,
        embedding_url=f.embedding.url,
        embedding_model=f.embedding.model,
        gates=_gate_config(f.gates),
        probes=f.probes,
        rules=_checked_rules(f.rules, "rules", f.probes, camp.prompt_classes, path, getattr(f, "variants", None)),
        expectations=_checked_rules(f.expectations, "expectations", f.probes, camp.prompt_classes, path,
                                    getattr(f, "variants", None)),
        num_ctx=server.num_ctx,
        api_key_env=server.api_key_env,
        unstable_ratio=f.report.unstable_ratio,
        report=f.report.model_dump(),
        sections={n: getattr(f, n) for n in registered()} | axes,
        **axes,
    )


def _axes(load: LoadSettings | None, depth: DepthSettings | None, path: str, prompt_tokens: dict[str, int],
          max_tokens: int, n_models: int, planned_cells: int) -> dict[str, Any]:
    """``[load]`` and ``[depth]`` checked against the rest of the campaign, ``max_tokens`` filled in from it.

    Returns the Campaign's ``load`` and ``depth`` fields.
    """
    if load is not None:
        if load.prompt_class not in prompt_tokens:
            raise CampaignError(path, "load.prompt_class", f"expected one of {', '.join(sorted(prompt_tokens))}, "
                                                           f"got {validate.describe(load.prompt_class)}")
        total = load.total_requests()
        if total > MAX_PLANNED_SAMPLES:  # each request is a stored sample: a plan that cannot end is refused now
            key = "load.requests_per_stream" if load.streams else (
                "load.duration_s" if load.duration_s is not None else "load.requests_per_rate")
            raise CampaignError(path, key,
                                f"the load steps come to {total:,} requests per model "
                                f"(streams x requests_per_stream, plus each rate step's); "
                                f"at most {MAX_PLANNED_SAMPLES:,}")
        if load.max_tokens is None:
            load = load.model_copy(update={"max_tokens": max_tokens})
    if depth is not None:
        answer = max_tokens if depth.max_tokens is None else depth.max_tokens
        # a depth plus its answer must fit a context window somewhere: beyond the largest, no server could take it
        room = MAX_NUM_CTX - answer
        for i, tokens in enumerate(depth.tokens):
            if tokens > room:
                raise CampaignError(path, f"depth.tokens[{i}]",
                                    f"expected an integer from 0 to {room:,} (the largest context window "
                                    f"less depth.max_tokens {answer:,}), got {tokens:,}")
        depth = depth.model_copy(update={"max_tokens": answer})
    # every model takes every step: bounded per model above, the whole run's plan is bounded here
    steps = planned_samples(load, depth, n_models)
    if planned_cells + steps > MAX_PLANNED_SAMPLES:
        raise CampaignError(path, "load.requests_per_stream" if load else "depth.repetitions",
                            f"the plan comes to {planned_cells + steps:,} samples ({planned_cells:,} in cells, "
                            f"{steps:,} in load and depth steps for {n_models:,} models); "
                            f"at most {MAX_PLANNED_SAMPLES:,}")
    return {"load": load, "depth": depth}


def _name_from_file(path: str) -> str:
    try:
        return validate.name(Path(path).stem, max_chars=NAME_CHARS)
    except validate.Invalid as exc:
        raise CampaignError(path, "campaign.name", f"not set, and the file name cannot stand in for it: {exc}") from None


def parse_gates(text: str, path: str = "<campaign>") -> dict[str, GateConfig]:
    """Only the ``[gates]`` of campaign TOML text, validated as :func:`parse_campaign` does.

    For a campaign frozen by an older cardproof that no longer validates as
    a whole (a key since removed, such as ``[server] api_key``): its gates
    still say which samples its medians left out.
    """
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise CampaignError(path, "-", f"not valid TOML: {exc}") from exc
    gates = data.get("gates", {}) if isinstance(data, dict) else {}
    return _gate_config(check_model(campaign_model(("gates",)), {"gates": gates}, path).gates)


def _gate_config(gates) -> dict[str, GateConfig]:
    """The gates' own defaults, with what the campaign sets."""
    out = default_config()
    for name, settings in gates:
        if settings is not None:
            default = out[name]
            out[name] = GateConfig(
                default.threshold if settings.threshold is None else settings.threshold,
                default.exclude if settings.exclude is None else settings.exclude,
            )
    return out


def _checked_rules(rules: dict[str, str], key: str, probes: ProbeSettings | None, classes, path: str,
                   variants=None) -> dict[str, str]:
    """Each rule parsed and type-checked now, so a typo fails before the run, naming the rule.

    ``key="expectations"``: what the author believes before measuring, in the same language.
    ``variants``: the campaign's ``[variants]``, whose figures a rule reads as ``variant.<name>.*``.
    """
    names = [v.name for v in variants.variants()] if variants is not None else []
    vclasses = (variants.prompt_classes or classes) if variants is not None else None
    for name, text in rules.items():
        try:
            validate_rule(text, probes=probes.run if probes else (), classes=list(classes), verdicts=VERDICTS,
                          variants=names, variant_classes=vclasses)
        except RuleError as exc:
            raise CampaignError(path, f"{key}.{name}", str(exc)) from None
    return dict(rules)
