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
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from . import validate
from .backends import BACKENDS, taking
from .campaign_check import (
    MAX_CAMPAIGN_BYTES,
    MAX_CODE_TIMEOUT_S,
    MAX_GATE_THRESHOLD,
    MAX_MODELS,
    MAX_NUM_CTX,
    MAX_PLANNED_SAMPLES,
    MAX_PROBE_REPEAT,
    MAX_PROMPT_CLASSES,
    MAX_REPETITIONS,
    MAX_REQUEST_TIMEOUT_S,
    MAX_RULES,
    MAX_TOKENS,
    NAME_CHARS,
    CampaignError,
    Checker,
    class_name,
    report_settings,
)
from .gates import GATES, GateConfig, default_config
from .load.campaign import DepthSettings, LoadSettings, axes_settings
from .probes import PROBES, VERDICTS
from .prompts import PROMPT_CLASSES
from .rules import RuleError, validate_rule

@dataclass(frozen=True)
class ModelSpec:
    name: str
    file: str | None = None
    pinned: bool = False


@dataclass(frozen=True)
class ProbeSettings:
    """``[probes]``: which probes run on every model, how often, within which limits."""

    run: tuple[str, ...] = tuple(PROBES)
    repeat: int = 2  # attempts on identical input; 1 leaves stability unchecked
    max_tokens: int = 1024
    reasoning: bool = False  # thinking switch for all probes but `thinking` (always on)
    code_timeout_s: float = 10.0


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
    load: LoadSettings | None = None  # [load]: concurrency steps (daemon/load)
    depth: DepthSettings | None = None  # [depth]: context-depth steps (daemon/load)

    def repetitions_for(self, reasoning: bool) -> int:
        return self.repetitions_reasoning if reasoning else self.repetitions


_PROBE_KEYS = {"run", "repeat", "max_tokens", "reasoning", "code_timeout_s"}
_TOP_KEYS = {"probes", "rules", "campaign", "server", "models", "prompts", "gates", "embedding", "report",
             "expectations", "load", "depth"}
_CAMPAIGN_KEYS = {
    "name",
    "prompt_classes",
    "reasoning",
    "repetitions",
    "repetitions_reasoning",
    "max_tokens",
    "canaries",
}
_SERVER_KEYS = {"backend", "url", "request_timeout_s", "log_file", "journal_unit", "num_ctx", "api_key_env"}
_MODEL_KEYS = {"name", "file", "pinned"}


def _name(v):
    return validate.name(v, max_chars=NAME_CHARS)


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


def parse_campaign(text: str, path: str = "<campaign>") -> Campaign:
    """Validate campaign TOML text; ``path`` is only used in messages."""
    c = Checker(path)
    if len(text) > MAX_CAMPAIGN_BYTES:
        c.fail("-", f"text is longer than {MAX_CAMPAIGN_BYTES:,} characters (a campaign is settings)")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CampaignError(path, "-", f"not valid TOML: {exc}") from exc
    except RecursionError:
        raise CampaignError(path, "-", f"not usable TOML: {validate.NESTED_TOO_DEEP}") from None
    c.unknown(data, _TOP_KEYS, "")

    camp = c.table(data.get("campaign", {}), "campaign")
    c.unknown(camp, _CAMPAIGN_KEYS, "campaign.")
    if "name" in camp:
        cname = c.value(camp, "name", "campaign.", _name)
    else:
        try:
            cname = _name(Path(path).stem)
        except validate.Invalid as exc:
            c.fail("campaign.name", f"not set, and the file name cannot stand in for it: {exc}")

    if "server" not in data:
        c.fail("server", "missing (expected a table with backend and url)")
    server = c.table(data["server"], "server")
    c.unknown(server, _SERVER_KEYS, "server.")
    backend = server.get("backend", "llama-server")
    if not isinstance(backend, str) or backend not in BACKENDS:  # a TOML table or list is unhashable
        c.fail("server.backend", f"expected one of {', '.join(BACKENDS)}, got {validate.describe(backend)}")
    url = c.value(server, "url", "server.", validate.http_url, required="an http:// or https:// URL")
    log_file = c.value(server, "log_file", "server.", validate.path)
    journal_unit = c.value(server, "journal_unit", "server.", validate.unit_name)
    timeout = c.number(server, "request_timeout_s", "server.", 300.0, 0, MAX_REQUEST_TIMEOUT_S, above=True)
    num_ctx = c.integer(server, "num_ctx", "server.", 0, 1, MAX_NUM_CTX) or None
    if num_ctx and "num_ctx" not in BACKENDS[backend].options:
        c.fail("server.num_ctx", f"only the {' and '.join(taking('num_ctx'))} backend takes num_ctx "
                                 f"(backend is {backend!r})")
    api_key_env = c.value(server, "api_key_env", "server.", validate.env_name)

    models = _models(c, data)
    prompt_tokens = _prompt_tokens(c, data)
    classes = c.names(camp, "prompt_classes", "campaign.", ["short", "medium", "long"], prompt_tokens,
                      "prompt class")

    reasoning = camp.get("reasoning", [False])
    if isinstance(reasoning, bool):
        reasoning = [reasoning]
    if (
        not isinstance(reasoning, list)
        or not reasoning
        or not all(isinstance(r, bool) for r in reasoning)
    ):
        c.fail("campaign.reasoning",
               f"expected true, false or a list of them, got {validate.describe(reasoning)}")
    reasoning = list(dict.fromkeys(reasoning))

    reps = c.integer(camp, "repetitions", "campaign.", 5, 1, MAX_REPETITIONS)
    reps_r = c.integer(camp, "repetitions_reasoning", "campaign.", 3, 1, MAX_REPETITIONS)
    planned = len(models) * len(classes) * sum(reps_r if r else reps for r in reasoning)
    if planned > MAX_PLANNED_SAMPLES:
        c.fail("campaign.repetitions", f"the plan comes to {planned:,} samples (models x prompt classes x "
                                       f"repetitions per reasoning setting); at most {MAX_PLANNED_SAMPLES:,}")
    max_tokens = c.integer(camp, "max_tokens", "campaign.", 128, 1, MAX_TOKENS)
    canaries = c.boolean(camp, "canaries", "campaign.", False)

    emb = c.table(data.get("embedding", {}), "embedding")
    c.unknown(emb, {"url", "model"}, "embedding.")
    emb_url = c.value(emb, "url", "embedding.", validate.http_url,
                      required="an http:// or https:// URL" if emb else None)
    emb_model = c.value(emb, "model", "embedding.", _name)

    probes = _probes(c, data)
    report = report_settings(data, path)
    return Campaign(
        name=cname,
        path=path,
        text=text,
        sha256=hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
        backend=backend,
        url=url,
        request_timeout_s=timeout,
        log_file=log_file,
        journal_unit=journal_unit,
        models=tuple(models),
        prompt_classes=tuple(classes),
        prompt_tokens=prompt_tokens,
        reasoning=tuple(reasoning),
        repetitions=reps,
        repetitions_reasoning=reps_r,
        max_tokens=max_tokens,
        canaries=canaries,
        embedding_url=emb_url,
        embedding_model=emb_model,
        gates=_gates(c, data),
        probes=probes,
        rules=_rules(c, data, probes, classes),
        expectations=_rules(c, data, probes, classes, "expectations"),
        num_ctx=num_ctx,
        api_key_env=api_key_env,
        unstable_ratio=report["unstable_ratio"],
        **axes_settings(data, path, prompt_tokens, max_tokens),
    )


def _models(c: Checker, data: dict) -> list[ModelSpec]:
    models_raw = data.get("models")
    if not isinstance(models_raw, list) or not models_raw:
        c.fail("models", "expected at least one [[models]] table")
    if len(models_raw) > MAX_MODELS:
        c.fail("models", f"expected at most {MAX_MODELS:,} [[models]] tables, got {len(models_raw):,}")
    models = []
    seen = set()
    for i, m in enumerate(models_raw):
        prefix = f"models[{i}]."
        m = c.table(m, f"models[{i}]")
        c.unknown(m, _MODEL_KEYS, prefix)
        mname = c.value(m, "name", prefix, _name, required="a model name")
        if mname in seen:
            c.fail(prefix + "name", f"duplicate model name {validate.quoted(mname)}")
        seen.add(mname)
        mfile = c.value(m, "file", prefix, validate.path)
        pinned = c.boolean(m, "pinned", prefix, False)
        models.append(ModelSpec(mname, mfile, pinned))
    if sum(m.pinned for m in models) > 1:
        c.fail("models", "at most one model may be pinned")
    return models


def _prompt_tokens(c: Checker, data: dict) -> dict[str, int]:
    """Built-in prompt classes, plus or overridden by ``[prompts.<class>] target_tokens``."""
    prompts = c.table(data.get("prompts", {}), "prompts")
    if len(prompts) > MAX_PROMPT_CLASSES:
        c.fail("prompts", f"expected at most {MAX_PROMPT_CLASSES} prompt classes, got {len(prompts):,}")
    out = dict(PROMPT_CLASSES)
    for pname, ptab in prompts.items():
        try:
            class_name(pname)
        except validate.Invalid as exc:
            c.fail(f"prompts.{pname}", str(exc))
        ptab = c.table(ptab, f"prompts.{pname}")
        c.unknown(ptab, {"target_tokens"}, f"prompts.{pname}.")
        out[pname] = c.integer(ptab, "target_tokens", f"prompts.{pname}.", None, 1, MAX_TOKENS)
    return out


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
    return _gates(Checker(path), data)


def _gates(c: Checker, data: dict) -> dict[str, GateConfig]:
    gates_raw = c.table(data.get("gates", {}), "gates")
    c.unknown(gates_raw, set(GATES), "gates.")
    gates = default_config()
    for gname, gtab in gates_raw.items():
        prefix = f"gates.{gname}."
        gtab = c.table(gtab, f"gates.{gname}")
        c.unknown(gtab, {"threshold", "exclude"}, prefix)
        threshold = c.number(gtab, "threshold", prefix, gates[gname].threshold, 0, MAX_GATE_THRESHOLD)
        exclude = c.boolean(gtab, "exclude", prefix, gates[gname].exclude)
        gates[gname] = GateConfig(threshold, exclude)
    return gates


def _probes(c: Checker, data: dict) -> ProbeSettings | None:
    if "probes" not in data:
        return None
    tab = c.table(data["probes"], "probes")
    c.unknown(tab, _PROBE_KEYS, "probes.")
    run = c.names(tab, "run", "probes.", list(PROBES), PROBES, "probe")
    return ProbeSettings(
        run=tuple(run),
        repeat=c.integer(tab, "repeat", "probes.", 2, 1, MAX_PROBE_REPEAT),
        max_tokens=c.integer(tab, "max_tokens", "probes.", 1024, 1, MAX_TOKENS),
        reasoning=c.boolean(tab, "reasoning", "probes.", False),
        code_timeout_s=c.number(tab, "code_timeout_s", "probes.", 10.0, 0, MAX_CODE_TIMEOUT_S, above=True),
    )


def _rule_text(value):
    return validate.text(value, what="a rule as a non-empty string", max_chars=4000, allow="\t\n\r")


def _rules(c: Checker, data: dict, probes: ProbeSettings | None, classes: list, key: str = "rules") -> dict[str, str]:
    """Each rule parsed and type-checked now, so a typo fails before the run, naming the rule.

    ``key="expectations"``: what the author believes before measuring, in the same language.
    """
    tab = c.table(data.get(key, {}), key)
    if len(tab) > MAX_RULES:
        c.fail(key, f"expected at most {MAX_RULES} rules, got {len(tab):,}")
    out = {}
    for name, text in tab.items():
        try:
            _name(name)
        except validate.Invalid as exc:
            c.fail(f"{key}.{name}", f"rule name: {exc}")
        text = c.value(tab, name, f"{key}.", _rule_text)
        try:
            validate_rule(text, probes=probes.run if probes else (), classes=classes, verdicts=VERDICTS)
        except RuleError as exc:
            c.fail(f"{key}.{name}", str(exc))
        out[name] = text
    return out
