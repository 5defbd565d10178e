"""Campaign files: TOML in, a validated Campaign out, or one clear error.

Every error names the file, the key and what was expected, so a user can fix
the file without reading code. Nothing is written to the store until the file
has validated completely.
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .gates import GATES, GateConfig, default_config
from .probes import PROBES, VERDICTS
from .prompts import PROMPT_CLASSES
from .rules import RuleError, validate_rule

BACKENDS = ("llama-server", "ollama", "llama-swap", "openai")


class CampaignError(Exception):
    """A campaign file that cannot be used; str() is the one-line message."""

    def __init__(self, path: str, key: str, message: str):
        self.path = path
        self.key = key
        super().__init__(f"{path}: key '{key}': {message}")


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

    def repetitions_for(self, reasoning: bool) -> int:
        return self.repetitions_reasoning if reasoning else self.repetitions


_PROBE_KEYS = {"run", "repeat", "max_tokens", "reasoning", "code_timeout_s"}
_TOP_KEYS = {"probes", "rules", "campaign", "server", "models", "prompts", "gates", "embedding"}
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


def _type_name(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


class _Checker:
    def __init__(self, path: str):
        self.path = path

    def fail(self, key: str, message: str) -> None:
        raise CampaignError(self.path, key, message)

    def table(self, data: Any, key: str) -> dict:
        if not isinstance(data, dict):
            self.fail(key, f"expected a table, got {_type_name(data)}")
        return data

    def unknown(self, data: dict, allowed: set[str], prefix: str) -> None:
        for k in data:
            if k not in allowed:
                known = ", ".join(sorted(allowed))
                self.fail(f"{prefix}{k}", f"unknown key (expected one of: {known})")

    def string(self, data: dict, key: str, prefix: str, *, required: bool, default=None):
        if key not in data:
            if required:
                self.fail(prefix + key, "missing (expected a string)")
            return default
        value = data[key]
        if not isinstance(value, str) or not value.strip():
            self.fail(prefix + key, f"expected a non-empty string, got {_type_name(value)}")
        return value

    def positive_int(self, data: dict, key: str, prefix: str, default: int) -> int:
        if key not in data:
            return default
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            self.fail(prefix + key, f"expected a positive integer, got {_type_name(value)}")
        return value

    def number(self, data: dict, key: str, prefix: str, default: float) -> float:
        if key not in data:
            return default
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            self.fail(prefix + key, f"expected a non-negative number, got {_type_name(value)}")
        return float(value)


def load_campaign(path: str | Path) -> Campaign:
    """Read and validate a campaign file; raise CampaignError naming the key."""
    p = Path(path)
    name = str(p)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise CampaignError(name, "-", f"cannot read file: {exc.strerror}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CampaignError(name, "-", f"not UTF-8 text (byte {exc.start})") from exc
    return parse_campaign(text, name)


def parse_campaign(text: str, path: str = "<campaign>") -> Campaign:
    """Validate campaign TOML text; ``path`` is only used in messages."""
    c = _Checker(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CampaignError(path, "-", f"not valid TOML: {exc}") from exc
    c.unknown(data, _TOP_KEYS, "")

    camp = c.table(data.get("campaign", {}), "campaign")
    c.unknown(camp, _CAMPAIGN_KEYS, "campaign.")
    cname = c.string(camp, "name", "campaign.", required=False, default=Path(path).stem)

    if "server" not in data:
        c.fail("server", "missing (expected a table with backend and url)")
    server = c.table(data["server"], "server")
    c.unknown(server, _SERVER_KEYS, "server.")
    backend = c.string(server, "backend", "server.", required=False, default="llama-server")
    if backend not in BACKENDS:
        c.fail("server.backend", f"expected one of {', '.join(BACKENDS)}, got {backend!r}")
    url = c.string(server, "url", "server.", required=True)
    if not url.startswith(("http://", "https://")):
        c.fail("server.url", f"expected an http:// or https:// URL, got {url!r}")
    log_file = c.string(server, "log_file", "server.", required=False)
    journal_unit = c.string(server, "journal_unit", "server.", required=False)
    timeout = c.number(server, "request_timeout_s", "server.", 300.0)
    if timeout <= 0:
        c.fail("server.request_timeout_s", "expected a number above 0")
    num_ctx = c.positive_int(server, "num_ctx", "server.", 0) or None
    if num_ctx and backend != "ollama":
        c.fail("server.num_ctx", f"only the ollama backend takes num_ctx (backend is {backend!r})")
    api_key_env = c.string(server, "api_key_env", "server.", required=False)

    models_raw = data.get("models")
    if not isinstance(models_raw, list) or not models_raw:
        c.fail("models", "expected at least one [[models]] table")
    models = []
    seen = set()
    for i, m in enumerate(models_raw):
        prefix = f"models[{i}]."
        m = c.table(m, f"models[{i}]")
        c.unknown(m, _MODEL_KEYS, prefix)
        mname = c.string(m, "name", prefix, required=True)
        if mname in seen:
            c.fail(prefix + "name", f"duplicate model name {mname!r}")
        seen.add(mname)
        mfile = c.string(m, "file", prefix, required=False)
        pinned = m.get("pinned", False)
        if not isinstance(pinned, bool):
            c.fail(prefix + "pinned", f"expected true or false, got {_type_name(pinned)}")
        models.append(ModelSpec(mname, mfile, pinned))
    if sum(m.pinned for m in models) > 1:
        c.fail("models", "at most one model may be pinned")

    classes = camp.get("prompt_classes", ["short", "medium", "long"])
    if not isinstance(classes, list) or not classes:
        c.fail("campaign.prompt_classes", "expected a non-empty list of prompt class names")
    prompts = c.table(data.get("prompts", {}), "prompts")
    prompt_tokens = dict(PROMPT_CLASSES)
    for pname, ptab in prompts.items():
        ptab = c.table(ptab, f"prompts.{pname}")
        c.unknown(ptab, {"target_tokens"}, f"prompts.{pname}.")
        prompt_tokens[pname] = c.positive_int(ptab, "target_tokens", f"prompts.{pname}.", 0)
        if prompt_tokens[pname] == 0:
            c.fail(f"prompts.{pname}.target_tokens", "missing (expected a positive integer)")
    for cls in classes:
        if not isinstance(cls, str) or cls not in prompt_tokens:
            known = ", ".join(sorted(prompt_tokens))
            c.fail("campaign.prompt_classes", f"unknown prompt class {cls!r} (known: {known})")

    reasoning = camp.get("reasoning", [False])
    if isinstance(reasoning, bool):
        reasoning = [reasoning]
    if (
        not isinstance(reasoning, list)
        or not reasoning
        or not all(isinstance(r, bool) for r in reasoning)
    ):
        c.fail("campaign.reasoning", f"expected true, false or a list of them, got {_type_name(reasoning)}")

    reps = c.positive_int(camp, "repetitions", "campaign.", 5)
    reps_r = c.positive_int(camp, "repetitions_reasoning", "campaign.", 3)
    max_tokens = c.positive_int(camp, "max_tokens", "campaign.", 128)

    canaries = camp.get("canaries", False)
    if not isinstance(canaries, bool):
        c.fail("campaign.canaries", f"expected true or false, got {_type_name(canaries)}")

    emb = c.table(data.get("embedding", {}), "embedding")
    c.unknown(emb, {"url", "model"}, "embedding.")
    emb_url = c.string(emb, "url", "embedding.", required=bool(emb))
    if emb_url and not emb_url.startswith(("http://", "https://")):
        c.fail("embedding.url", f"expected an http:// or https:// URL, got {emb_url!r}")
    emb_model = c.string(emb, "model", "embedding.", required=False)

    gates_raw = c.table(data.get("gates", {}), "gates")
    gates = default_config()
    for gname, gtab in gates_raw.items():
        if gname not in GATES:
            c.unknown({gname: 0}, set(GATES), "gates.")
        gtab = c.table(gtab, f"gates.{gname}")
        c.unknown(gtab, {"threshold", "exclude"}, f"gates.{gname}.")
        threshold = c.number(gtab, "threshold", f"gates.{gname}.", gates[gname].threshold)
        exclude = gtab.get("exclude", gates[gname].exclude)
        if not isinstance(exclude, bool):
            c.fail(f"gates.{gname}.exclude", f"expected true or false, got {_type_name(exclude)}")
        gates[gname] = GateConfig(threshold, exclude)

    probes = _probes(c, data)
    rules = _rules(c, data, probes, classes)

    return Campaign(
        name=cname,
        path=path,
        text=text,
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        backend=backend,
        url=url.rstrip("/"),
        request_timeout_s=timeout,
        log_file=log_file,
        journal_unit=journal_unit,
        models=tuple(models),
        prompt_classes=tuple(classes),
        prompt_tokens=prompt_tokens,
        reasoning=tuple(dict.fromkeys(reasoning)),
        repetitions=reps,
        repetitions_reasoning=reps_r,
        max_tokens=max_tokens,
        canaries=canaries,
        embedding_url=emb_url.rstrip("/") if emb_url else None,
        embedding_model=emb_model,
        gates=gates,
        probes=probes,
        rules=rules,
        num_ctx=num_ctx,
        api_key_env=api_key_env,
    )


def _probes(c: _Checker, data: dict) -> ProbeSettings | None:
    if "probes" not in data:
        return None
    tab = c.table(data["probes"], "probes")
    c.unknown(tab, _PROBE_KEYS, "probes.")
    run = tab.get("run", list(PROBES))
    if not isinstance(run, list) or not run or not all(isinstance(p, str) for p in run):
        c.fail("probes.run", f"expected a non-empty list of probe names, got {_type_name(run)}")
    for p in run:
        if p not in PROBES:
            c.fail("probes.run", f"unknown probe {p!r} (known: {', '.join(PROBES)})")
    reasoning = tab.get("reasoning", False)
    if not isinstance(reasoning, bool):
        c.fail("probes.reasoning", f"expected true or false, got {_type_name(reasoning)}")
    timeout = c.number(tab, "code_timeout_s", "probes.", 10.0)
    if timeout <= 0:
        c.fail("probes.code_timeout_s", "expected a number above 0")
    return ProbeSettings(
        run=tuple(dict.fromkeys(run)),
        repeat=c.positive_int(tab, "repeat", "probes.", 2),
        max_tokens=c.positive_int(tab, "max_tokens", "probes.", 1024),
        reasoning=reasoning,
        code_timeout_s=timeout,
    )


def _rules(c: _Checker, data: dict, probes: ProbeSettings | None, classes: list) -> dict[str, str]:
    """Each rule parsed and type-checked now, so a typo fails before the run, naming the rule."""
    tab = c.table(data.get("rules", {}), "rules")
    out = {}
    for name, text in tab.items():
        if not isinstance(text, str) or not text.strip():
            c.fail(f"rules.{name}", f"expected a rule as a non-empty string, got {_type_name(text)}")
        try:
            validate_rule(text, probes=probes.run if probes else (), classes=classes, verdicts=VERDICTS)
        except RuleError as exc:
            c.fail(f"rules.{name}", str(exc))
        out[name] = text
    return out
