"""What a run measured under: the conditions each trend point carries, and what differs between two runs.

Run-level conditions come from the run row (server build, backend, the
cardproof that measured, CPU, GPUs and driver where NVML saw them, the
machine's load at the run's start and end) and from the frozen campaign,
read as the settings it was parsed into when frozen (``campaigns.campaign_json``; never as text: a
comment, a reordered table or a server's new port is no other campaign).
Model-level ones come from the model row (quantisation, file digest) and
from the facts parsed from the load's log lines (context, KV cache types,
offload, speculative decoding, draft model). A condition that was not
stored is absent, never guessed: a run without log lines says nothing about
its KV cache types, and "absent" next to "q8_0" is not reported as a change.

``differences`` is the one comparison of two runs' conditions: the compare
page, the run article's comparison, ``cardproof compare`` and the trend pages
all read it. Each ``Difference`` says whether it can move a figure: an
address's port, where a log file or a model file lies, which variable holds
the API key cannot, and the pages say those apart in small print.
"""

from __future__ import annotations

import functools
import json
import math
from typing import NamedTuple
from urllib.parse import urlsplit, urlunsplit

from cardproof.daemon.campaign.frozen import from_normalised
from cardproof.daemon.store.redact import public_url, redact_secrets

from cardproof.marks import N_
from ..mdsafe import MD, code_span, esc
from cardproof.daemon.store import json_value

#: the machine's load as a condition's name: "0.40 / 1.25" (runs.host_json, m027)
LOAD_CONDITION = N_("machine load (1-minute average at start / end)")
#: the machine's load differs only where it moved by this many busy CPUs at the start or the end:
#: about what one more process pinned beside a single-stream server takes
LOAD_DIFFERENCE = 1.0
#: run-level conditions, in the order the page lists them
RUN_CONDITIONS = (N_("server build"), "backend", N_("cardproof version"), "CPU", "GPUs", "driver", "CUDA", "host",
                  LOAD_CONDITION, N_("campaign file"))
#: load facts that change what a model measures (daemon/logs/parsers), by the label the page shows
FACT_CONDITIONS = {
    "ctx_size": "context",
    "kv_cache_type_k": N_("KV cache type K"),
    "kv_cache_type_v": N_("KV cache type V"),
    "offloaded_layers": N_("offloaded layers"),
    "spec_type": "speculative decoding",
    "draft_model": N_("draft model"),
}
MODEL_CONDITIONS = ("quantisation", N_("file digest"), *FACT_CONDITIONS.values())
#: a campaign setting's condition is named ``<kind>:<key>`` (the key as the campaign file spells it);
#: ``setting`` can move a figure, the others cannot
MOVES, PORT, PATH, ASIDE = "setting", "port", "path", "aside"
_KINDS = (MOVES, PORT, PATH, ASIDE)


class Difference(NamedTuple):
    """One condition that differs between two runs: its name and its value in each.

    A tuple of three, so a page's cache and a test read it as (name, before, after).
    """

    name: str
    before: str
    after: str

    @property
    def kind(self) -> str | None:
        """``setting``, ``port``, ``path`` or ``aside`` for a campaign setting; None for a stored condition."""
        head, sep, _ = self.name.partition(":")
        return head if sep and head in _KINDS else None

    @property
    def key(self) -> str:
        """The campaign key (``campaign.max_tokens``), or the condition's name."""
        return self.name.partition(":")[2] if self.kind else self.name

    @property
    def moves(self) -> bool:
        """Whether the difference can move a figure (a port, a file's place, a variable's name cannot)."""
        return self.kind in (None, MOVES)


def differences(before: dict[str, str], after: dict[str, str]) -> list[Difference]:
    """Each condition stored on both sides with different values, in the page's order.

    ``before``/``after``: ``run_conditions`` (with ``model_conditions`` of a model) of two runs.
    The machine's load differs only by ``LOAD_DIFFERENCE`` busy CPUs or more.
    """
    if before == after:  # most neighbouring points of a series: one comparison in C, no key lists
        return []
    order = [*RUN_CONDITIONS, *MODEL_CONDITIONS]
    keys = [k for k in order if k in before and k in after] + sorted(
        k for k in before.keys() & after.keys() if k not in order)
    out = [Difference(k, before[k], after[k]) for k in keys if before[k] != after[k]]
    return [d for d in out if d.name != LOAD_CONDITION or _load_moved(d.before, d.after)]


def moving(diffs: list[Difference]) -> list[Difference]:
    """The differences that can move a figure."""
    return [d for d in diffs if d.moves]


def aside(diffs: list[Difference]) -> list[Difference]:
    """The differences that cannot move a figure (said in small print)."""
    return [d for d in diffs if not d.moves]


def _loads(value: str) -> list[float | None]:
    out = []
    for part in str(value).split("/"):
        try:
            x = float(part)
        except ValueError:
            x = None
        out.append(x if x is not None and math.isfinite(x) else None)
    return out


def _load_moved(before: str, after: str) -> bool:
    return any(a is not None and b is not None and abs(a - b) >= LOAD_DIFFERENCE
               for a, b in zip(_loads(before), _loads(after)))


def _gpu_conditions(raw: str | None) -> dict:
    data = json_value(raw, dict, {})
    out = {}
    gpus = data.get("gpus") if isinstance(data.get("gpus"), list) else []
    names = [str(g.get("name")) for g in gpus if isinstance(g, dict) and g.get("name")]
    if data.get("available") is False:
        out["GPUs"] = "none (CPU only)"
    elif names:
        out["GPUs"] = ", ".join(names)
    if data.get("driver"):
        out["driver"] = str(data["driver"])
    cuda = data.get("cuda_version") or data.get("cuda")
    if cuda:
        out["CUDA"] = str(cuda)
    return out


def _host_conditions(raw: str | None) -> dict:
    """CPU and the machine's load from ``runs.host_json`` (m027); an earlier run has none: no change."""
    data = json_value(raw, dict, {})
    out = {}
    if data.get("cpu"):
        cpus = data.get("cpus")
        out["CPU"] = str(data["cpu"]) + (f" × {cpus}" if isinstance(cpus, int) and cpus > 0 else "")
    load = data.get("load_1m") if isinstance(data.get("load_1m"), dict) else {}
    if any(_figure(load.get(k)) for k in ("start", "end")):
        out[LOAD_CONDITION] = " / ".join(f"{load[k]:.2f}" if _figure(load.get(k)) else "—" for k in ("start", "end"))
    return out


def _figure(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def run_conditions(run: dict) -> dict[str, str]:
    """Run-level conditions of a run row (as ``queries.runs`` returns it); missing ones are left out.

    The campaign's settings are read from ``campaign_text`` (``queries.run_view``) or ``_campaign_text``
    (``series.run_settings``); a row with neither names its campaign file by its hash.
    """
    out = {}
    if run.get("server_build"):
        out["server build"] = str(run["server_build"])
    if run.get("backend"):
        out["backend"] = str(run["backend"])
    if run.get("cardproof_version"):
        out["cardproof version"] = str(run["cardproof_version"])
    out |= _host_conditions(run.get("host_json"))
    out |= _gpu_conditions(run.get("gpus_json"))
    if run.get("host"):
        out["host"] = str(run["host"])
    text = run.get("campaign_text", run.get("_campaign_text"))
    if text:
        out |= campaign_conditions(text, run.get("campaign_json", run.get("_campaign_json")))
    elif run.get("campaign_sha256"):
        out["campaign file"] = str(run["campaign_sha256"])[:12]
    return out


def campaign_conditions(text: str, parsed_json: str | None = None) -> dict[str, str]:
    """The frozen campaign's settings as conditions, ``<kind>:<key>`` -> value (``Difference.kind``).

    ``parsed_json`` is the campaign as parsed when the run froze it (``campaigns.campaign_json``);
    without it (unreadable then) the text's tables are read as they are.
    """
    return dict(_campaign_conditions(text, parsed_json))


@functools.lru_cache(maxsize=64)
def _campaign_conditions(text: str, parsed_json: str | None) -> tuple[tuple[str, str], ...]:
    # a nightly campaign freezes the same text every night: read once per text
    try:
        settings = _parsed(from_normalised(json.loads(parsed_json), text))
    except Exception:  # noqa: BLE001 -- unreadable when frozen, or damaged: its tables as they are
        settings = _unchecked(text)
    return tuple(settings.items())


def _show(value) -> str:
    """A setting's value as the page quotes it (credentials never)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return redact_secrets(value) or ""
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    elif hasattr(value, "_asdict"):
        value = value._asdict()
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str, separators=(", ", ": "))
    return redact_secrets(text) or ""


def _address(settings: dict, key: str, url: str | None) -> None:
    """A URL as two conditions: scheme, host and path (can move a figure), and its port (cannot)."""
    if not url:
        settings[f"{MOVES}:{key}"] = "—"
        return
    shown = public_url(str(url)) or ""
    try:
        parts = urlsplit(shown)
        port = parts.port
        host = parts.hostname or ""
    except ValueError:
        settings[f"{MOVES}:{key}"] = _show(shown)
        return
    host = f"[{host}]" if ":" in host else host
    settings[f"{MOVES}:{key}"] = _show(urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment)))
    if port is not None:
        settings[f"{PORT}:{key}"] = str(port)


def _file(settings: dict, key: str, path: str | None) -> None:
    """A file setting: whether it is set (can move a figure: a log read or not), and where it lies (cannot)."""
    settings[f"{MOVES}:{key}"] = "set" if path else "—"
    if path:
        settings[f"{PATH}:{key}"] = _show(str(path))


def _parsed(c) -> dict[str, str]:
    """The conditions of a parsed ``Campaign`` (daemon/campaign/model.py), keyed as its file spells them."""
    s: dict[str, str] = {}
    for key, value in (("campaign.prompt_classes", c.prompt_classes), ("campaign.reasoning", c.reasoning),
                       ("campaign.repetitions", c.repetitions),
                       ("campaign.repetitions_reasoning", c.repetitions_reasoning),
                       ("campaign.max_tokens", c.max_tokens), ("campaign.canaries", c.canaries),
                       ("server.backend", c.backend), ("server.request_timeout_s", c.request_timeout_s),
                       ("server.journal_unit", c.journal_unit), ("server.num_ctx", c.num_ctx),
                       ("embedding.model", c.embedding_model), ("report.unstable_ratio", c.unstable_ratio),
                       ("probes", c.probes), ("rules", c.rules), ("expectations", c.expectations),
                       ("models", [m.name for m in c.models])):
        s[f"{MOVES}:{key}"] = _show(value)
    s[f"{ASIDE}:server.api_key_env"] = _show(c.api_key_env)
    _address(s, "server.url", c.url)
    _address(s, "embedding.url", c.embedding_url)
    _file(s, "server.log_file", c.log_file)
    for cls, tokens in c.prompt_tokens.items():
        s[f"{MOVES}:prompts.{cls}.target_tokens"] = _show(tokens)
    for name, gate in c.gates.items():
        s[f"{MOVES}:gates.{name}"] = _show({"threshold": gate.threshold, "exclude": gate.exclude})
    for m in c.models:
        spec = m.model_dump(mode="json")
        _file(s, f"models[{m.name}].file", spec.pop("file", None))
        s[f"{MOVES}:models[{m.name}]"] = _show({k: v for k, v in spec.items() if k != "name"})
    for name, section in sorted({**c.sections, "load": c.load, "depth": c.depth}.items()):
        _section(s, name, section)
    return s


def _section(s: dict, name: str, section) -> None:
    """A table a module registered (``[load]``, ``[variants]``...): present or not, then each of its keys."""
    s[f"{MOVES}:{name}"] = "—" if section is None else "set"
    if section is None:
        return
    data = section.model_dump(mode="json") if hasattr(section, "model_dump") else section
    if not isinstance(data, dict):
        s[f"{MOVES}:{name}"] = _show(data)
        return
    for key, value in data.items():
        s[f"{MOVES}:{name}.{key}"] = _show(value)


def _unchecked(text: str) -> dict[str, str]:
    """A frozen text that was unreadable when frozen: its TOML tables' values, ports and paths apart."""
    import tomllib

    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError, ValueError):
        return {}
    s: dict[str, str] = {}
    for table, body in data.items():
        if not isinstance(body, dict):
            s[f"{MOVES}:{table}"] = _show(body)
            continue
        for key, value in body.items():
            name = f"{table}.{key}"
            if name in ("server.url", "embedding.url") and isinstance(value, str):
                _address(s, name, value)
            elif name == "server.log_file" and isinstance(value, str):
                _file(s, name, value)
            elif table in ("server", "embedding") and key not in ("backend", "request_timeout_s", "journal_unit",
                                                                   "num_ctx", "model"):
                s[f"{ASIDE}:{name}"] = "***"  # a key an older cardproof kept there may hold a secret
            else:
                s[f"{MOVES}:{name}"] = _show(value)
    return s


def _fact_text(num, text) -> str | None:
    if text not in (None, ""):
        return str(text)
    if isinstance(num, (int, float)) and not isinstance(num, bool):
        return str(int(num)) if float(num).is_integer() else str(num)
    return None


def model_conditions(db, run_ids: list[int] | None = None) -> dict[tuple[int, str], dict[str, str]]:
    """(run id, model name) -> model-level conditions, from two queries over the whole store (or ``run_ids``).

    Where a run loaded a model more than once with different facts, the
    values are joined ("q8_0 / f16"): both held during the run.
    """
    out: dict[tuple[int, str], dict[str, set]] = {}
    for r in db.query(
            """select distinct cells.run_id, models.name, models.quantisation, models.digest
               from cells join models on models.id = cells.model_id
               where coalesce(cells.kind, 'measure') = 'measure'""" + _among("cells.run_id", run_ids)):
        entry = out.setdefault((r["run_id"], r["name"]), {})
        if r["quantisation"]:
            entry.setdefault("quantisation", set()).add(str(r["quantisation"]))
        if r["digest"]:
            entry.setdefault(N_("file digest"), set()).add(str(r["digest"])[:12])
    if "facts" in db.table_names():
        names = list(FACT_CONDITIONS)
        marks = ",".join("?" * len(names))
        rows = db.query(
            f"""select loads.run_id, models.name as model, facts.name, facts.value_num, facts.value_text
                from facts join loads on loads.id = facts.load_id join models on models.id = loads.model_id
                where facts.name in ({marks}) and loads.merged_into is null and loads.run_id is not null"""
            + _among("loads.run_id", run_ids),
            names)
        for r in rows:
            value = _fact_text(r["value_num"], r["value_text"])
            if value is None or (r["run_id"], r["model"]) not in out:
                continue
            out[(r["run_id"], r["model"])].setdefault(FACT_CONDITIONS[r["name"]], set()).add(value)
    return {k: {name: " / ".join(sorted(vals)) for name, vals in v.items()} for k, v in out.items()}


def _among(column: str, ids: list[int] | None) -> str:
    """`` and column in (...)`` for a list of integer ids (written in the statement), or nothing."""
    return "" if ids is None else f" and {column} in ({','.join(str(int(i)) for i in ids) or 'null'})"


# How a difference reads on a page and in the terminal. The message ids are the catalogue's; they are
# literals here so the extractor finds them (report/locale/de/LC_MESSAGES/cardproof.po).
def _(message: str) -> str:
    return message


_LABELS = {MOVES: _("campaign setting {key}"), ASIDE: _("campaign setting {key}"), PORT: _("port of {key}"),
           PATH: _("path of {key}")}


def label(d: Difference, L) -> MD:
    """The difference's name in the page's language: a stored condition's, or the campaign key quoted."""
    if d.kind:
        return MD(L.gettext(_LABELS[d.kind])).format(key=code_span(d.key))
    return esc(L.gettext(d.name))


def _value(d: Difference, value: str, L) -> MD:
    if d.name == LOAD_CONDITION:  # two figures: in the page's number format
        return MD(" / ").join(esc(L.num(x, 2)) for x in _loads(value))
    return code_span(value) if str(value).strip() else MD("—")


def describe(d: Difference, L) -> MD:
    """``name: before → after`` as Markdown in the page's language, every value escaped."""
    return MD("{}: {} → {}").format(label(d, L), _value(d, d.before, L), _value(d, d.after, L))


def plain(d: Difference) -> str:
    """``name before -> after`` for the terminal (``cardproof compare``, ``cardproof history``)."""
    name = _LABELS[d.kind].format(key=d.key) if d.kind else d.name
    return f"{name} {d.before} -> {d.after}"
