"""Series per campaign × model × cell across runs, from stored samples, with their steps.

Everything is read in a handful of whole-store queries (plus one gate
lookup per run), so building every series is linear in samples and runs.
Canary and probe requests never enter a series: only measure cells and
measure samples are read, and only measured loads give load times.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict

from cardproof.daemon.campaign.check import DEFAULT_MIN_EFFECT_PCT
from cardproof.daemon.store.stats import percentile

from cardproof.marks import N_
from .. import findings, queries
from ..gates import run_gate_config
from ..privacy import public_text
from ..cell_kinds import KINDS, MEASURE, ORDER, SQL_KINDS
from ..stats import Spread
from .conditions import _among, aside, differences, model_conditions, moving, run_conditions
from .steps import find_steps

#: metric -> (samples column, higher is better)
METRICS = {
    "decode_tps": ("decode_tps", True),
    "prefill_tps": ("prefill_tps", True),
    "ttft_ms": ("ttft_ms", False),
    "load_seconds": (None, False),  # from the model's measured loads, not a sample column
    # a load step's generated tokens of every answered request per second of the step's wall time:
    # one figure per run (the bootstrap then resamples runs only)
    "aggregate_tps": (None, True),
    # a load step's 90th percentile time to first token over its answered requests: what a service
    # level names (``[load.slo] ttft_p90_ms``), one figure per run like the aggregate
    "ttft_p90_ms": (None, False),
}
#: the metrics a series of each kind of cell has: a prompt-class cell, a load step (concurrent
#: streams, daemon/run/load/), a context-depth step
KIND_METRICS = {name: list(kind.metrics) for name, kind in KINDS.items()}
#: a point in one of these states is shown but never starts or ends a step
OK = "ok"


def campaign_settings(campaign_json: str | None) -> dict:
    """The frozen campaign's ``[report]`` limits (report/findings/stable.py) and ``min_effect`` as a fraction.

    ``[report] min_effect_pct`` (default 5) is the smallest change a trend
    page calls a step. An unreadable frozen text gives the defaults.
    """
    limits = findings.report_limits(campaign_json)
    return limits | {"min_effect": limits.get("min_effect_pct", DEFAULT_MIN_EFFECT_PCT) / 100}


def _figure(v) -> bool:
    """A value a series may hold: a finite positive number (a damaged row reads as NULL, report/tolerance.py)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def slug(text: str) -> str:
    """A file-name-safe, stable part of a page name (the full name stays on the page).

    Made from the name as pages publish it (``privacy.public_text``, masked whatever the opt-out: a page's
    address is no place for it): a model named by its file ``/home/alice/m.gguf`` or a campaign naming a
    client's address gave the trend page and its CSV the user's name and the address in their file names."""
    s = re.sub(r"[^a-z0-9]+", "-", (public_text(str(text)) or "").lower()).strip("-")[:60]
    return s or "x"


def _state(run: dict, decode, decode_values: list[float], kind: str = "measure", refused: bool = False) -> str:
    if run["status"] != "completed":
        return str(run["status"] or "unknown")
    if refused:  # a depth the server's context cannot hold, refused before any request
        return "refused"
    if decode is None:
        return N_("no valid sample")
    if kind != "measure":
        # a load step's requests differ by stream and queue by design: their spread is the step's
        # figure, not a sign of an unstable cell
        return OK
    # the article's own rule (ratio, and the bootstrap interval where the campaign asks for it)
    cell = {"decode": decode, "valid": [{"decode_tps": v} for v in decode_values]}
    findings.judge_cell(cell, run["_limits"])
    return "unstable" if cell["unstable"] else OK


def _spread(values: list[float]) -> Spread | None:
    """``report.stats.spread`` of values already known to be finite floats: one sort, no checks
    (it runs once per point and metric: a quarter of a million times at 1,000 runs)."""
    if not values:
        return None
    v = sorted(values)
    n = len(v)
    return Spread(v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2, v[0], v[-1], n)


def _excluded_samples(db, runs: list[dict], where: str = "") -> set[int]:
    """Samples an excluding gate fired on, as ``report.gates.excluded_samples`` says per run, in one query.

    The gate configuration is read once per frozen campaign, not once per
    run, and the firings in one pass: a per-run query would scan the
    samples once for every run.
    """
    config_of: dict = {}
    excluding: dict[int, set[str]] = {}
    for r in runs:
        key = r["campaign_sha256"] or r["campaign_id"]  # the same frozen text gives the same gates
        if key not in config_of:
            config_of[key] = {g for g, c in run_gate_config(db, r["id"]).items() if c.exclude}
        excluding[r["id"]] = config_of[key]
    out: set[int] = set()
    for sid, gate, rid in db.execute(
            """select gate_results.sample_id, gate_results.gate, samples.run_id from gate_results
               join samples on samples.id = gate_results.sample_id where gate_results.fired = 1""" + where):
        if gate in excluding.get(rid, ()):
            out.add(sid)
    return out


def build_series(db, campaign: str | None = None, model: str | None = None) -> list[dict]:
    """Every series (campaign × model × cell) with points in time order and steps per metric.

    A cell is a prompt class with reasoning on or off, a load step (its
    number of concurrent streams and prompt class) or a context-depth step
    (its depth in tokens); each kind has its metrics (``KIND_METRICS``).

    A point is one run's cell: its valid samples per metric (gates that
    exclude, errors left out), their spread, its state (``ok``, the run's
    status where it did not complete, ``unstable``, ``no valid sample``),
    its conditions and what changed since the previous point.

    The report build makes the same series one trend page at a time and keeps each run's points
    between builds (report/history/pages.py).
    """
    runs = [r for r in queries.runs(db) if campaign is None or r["campaign_name"] == campaign]
    if not runs:
        return []
    settings = run_settings(db, runs)
    made = _run_points(db, runs, model, restrict=campaign is not None)
    grouped: dict[tuple, list[dict]] = defaultdict(list)
    for r in runs:
        for key, point in made.get(r["id"], []):
            grouped[tuple(key)].append(point)
    return series_of_points(grouped, lambda cid: settings[cid]["min_effect"])


def run_settings(db, runs: list[dict]) -> dict[int, dict]:
    """Campaign id -> its frozen text's settings (``campaign_settings``); each run gets its ``_limits``."""
    texts = {r["id"]: r["toml_text"] for r in db.query("select id, toml_text from campaigns")}
    parsed = {r["id"]: r["campaign_json"] for r in db.query("select id, campaign_json from campaigns")}
    settings_by_campaign: dict[int, dict] = {}
    by_sha: dict = {}  # a nightly campaign freezes the same text every night: read it once
    for r in runs:
        if r["campaign_id"] not in settings_by_campaign:
            key = r["campaign_sha256"] or r["campaign_id"]
            if key not in by_sha:
                by_sha[key] = campaign_settings(parsed.get(r["campaign_id"]))
            settings_by_campaign[r["campaign_id"]] = by_sha[key]
        r["_limits"] = settings_by_campaign[r["campaign_id"]]
        r["_campaign_text"] = texts.get(r["campaign_id"])  # its settings are conditions (conditions.py)
        r["_campaign_json"] = parsed.get(r["campaign_id"])  # ... as parsed when the run froze it
    return settings_by_campaign


def series_of_points(grouped: dict[tuple, list[dict]], min_effect_of, memo: tuple[dict, dict] | None = None,
                     judged: tuple[dict, dict] | None = None) -> list[dict]:
    """The series of points grouped by series key (``_run_points``' keys), in their order, with what
    changed between points and their steps. ``min_effect_of(campaign id)``: the smallest change a step
    is; ``memo`` and ``judged`` as in ``_steps``."""
    out = []
    for (camp, mname, kind, streams, depth, rate, cls, reasoning), points in grouped.items():
        points.sort(key=lambda p: (p["started_at"] or "", p["run_id"]))
        for prev, p in zip([None, *points], points):
            # what can move a figure marks the point; a port or a file's place is said apart, in small print
            diffs = differences(prev["conditions"], p["conditions"]) if prev else []
            p["changes"], p["aside"] = moving(diffs), aside(diffs)
        min_effect = min_effect_of(points[-1]["_campaign_id"])
        out.append({"campaign": camp, "model": mname, "prompt_class": cls, "reasoning": reasoning,
                    "kind": kind, "streams": streams, "depth_tokens": depth, "rate_rps": rate,
                    "metrics": KIND_METRICS[kind],
                    "page": f"trend-{slug(camp)}-{slug(mname)}", "min_effect": min_effect, "points": points})
    # prompt-class cells first (as before), then load steps by streams, offered rates, then depths
    out.sort(key=lambda s: (s["campaign"], s["model"], ORDER[s["kind"]], s["streams"] or 0, s["rate_rps"] or 0,
                            s["depth_tokens"] or 0, s["reasoning"], s["prompt_class"]))
    seen_models = set()
    for s in out:
        # a load time belongs to the model, not the cell: its steps are told once, with the model's first cell
        first = (s["campaign"], s["model"]) not in seen_models
        seen_models.add((s["campaign"], s["model"]))
        s["steps"] = _steps(s, [m for m in s["metrics"] if first or m != "load_seconds"], memo, judged)
    return out


def _run_points(db, runs: list[dict], model: str | None, restrict: bool,
                excluded: set[int] | None = None) -> dict[int, list[tuple]]:
    """Run id -> [(series key, point)] for ``runs``: their cells, samples, loads and conditions.

    ``restrict`` reads only these runs' rows (by the run-id indexes); otherwise every row once.
    ``model``: that model's cells alone (their samples by cell id). ``excluded``: the samples an
    excluding gate fired on, where the caller has them (``_excluded_samples`` of these runs).
    The points of one run and model share one conditions dict (they are the same).
    """
    by_id = {r["id"]: r for r in runs}
    ids = sorted(by_id)

    # a few runs are looked up by their ids; many (a first build) in one pass over each table
    def where_run(column: str) -> str:
        return _among(column, ids if restrict else None)

    if excluded is None:
        excluded = _excluded_samples(db, runs, where_run("samples.run_id"))
    cells = _point_cells(db, by_id, model, where_run("cells.run_id"))
    by_sample = where_run("samples.run_id") if model is None else _among("samples.cell_id", sorted(cells))
    _sample_values(db, cells, by_sample, excluded)
    loads = _load_seconds(db, by_id, where_run("loads.run_id"))
    facts = model_conditions(db, ids if restrict else None)
    run_facts: dict[int, dict] = {}
    conditions: dict[tuple[int, str], dict] = {}

    def of_run(run: dict, model_name: str) -> dict:  # the same for every cell of the run and model: made once
        key = (run["id"], model_name)
        if key not in conditions:
            if run["id"] not in run_facts:
                run_facts[run["id"]] = run_conditions(run)
            conditions[key] = run_facts[run["id"]] | facts.get(key, {})
        return conditions[key]

    out: dict[int, list[tuple]] = defaultdict(list)
    for c in cells.values():
        run = by_id[c["run_id"]]
        out[run["id"]].append(_point(c, run, loads, of_run(run, c["model"])))
    return out


def _point_cells(db, by_id: dict[int, dict], model: str | None, where_run: str) -> dict[int, dict]:
    """Cell id -> the cell row of these runs (of ``model`` where given) that a series can place: a
    prompt-class cell, or a step cell with its step row and a value on its axis."""
    cells: dict[int, dict] = {}
    steps_table = "load_steps" in db.table_names()
    rate_column = "load_steps.rate_rps" if steps_table and "rate_rps" in db["load_steps"].columns_dict \
        else "null as rate_rps"
    step_columns = ("load_steps.id as step_id, load_steps.streams, load_steps.depth_tokens, load_steps.wall_s, "
                    f"load_steps.refused_reason, load_steps.prompt_class as step_class, {rate_column}"
                    if steps_table else
                    "null as step_id, null as streams, null as depth_tokens, null as wall_s, "
                    "null as refused_reason, null as step_class, null as rate_rps")
    for c in db.query(
            f"""select cells.id, cells.run_id, cells.prompt_class, cells.reasoning, models.name as model,
                      coalesce(cells.kind, 'measure') as kind, {step_columns}
               from cells join models on models.id = cells.model_id
               {"left join load_steps on load_steps.cell_id = cells.id" if steps_table else ""}
               where coalesce(cells.kind, 'measure') in {SQL_KINDS}
               {where_run} {"" if model is None else "and models.name = ?"}""",
            [] if model is None else [model]):
        if c["run_id"] not in by_id or (model is not None and c["model"] != model):
            continue
        if c["kind"] != MEASURE and (c["step_id"] is None or not KINDS[c["kind"]].placed(c)):
            continue  # a step cell without its step row (or its streams/depth) cannot be placed in a series
        c["values"] = defaultdict(list)
        c["generated"] = 0
        cells[c["id"]] = c
    return cells


def _sample_values(db, cells: dict[int, dict], where: str, excluded: set[int]) -> None:
    """Each cell's figures from its own valid samples (``values``: metric -> list), and a step's aggregate
    tok/s and p90 TTFT."""
    # plain tuples and the figure test inline: this loop sees every sample of every run, the
    # largest part of building the series (a dict per row and a call per value cost as much again)
    columns = {"decode_tps": 2, "prefill_tps": 3, "ttft_ms": 4}
    plan = {kind: [(m, columns[m]) for m in ms if m in columns] for kind, ms in KIND_METRICS.items()}
    inf = math.inf
    for row in db.execute(
            f"""select cell_id, id, decode_tps, prefill_tps, ttft_ms, generated_tokens, error_kind,
                      coalesce(kind, 'measure') from samples
               where coalesce(kind, 'measure') in {SQL_KINDS} {where}
               order by id"""):
        c = cells.get(row[0])
        # a cell's own requests only: a canary or probe in a measure cell never enters its series
        if c is None or row[7] != c["kind"] or row[6] or row[1] in excluded:
            continue
        values = c["values"]
        for metric, i in plan[row[7]]:
            v = row[i]
            t = type(v)
            if (t is float or t is int) and 0 < v < inf:  # _figure(v), inline; NaN fails the comparison
                values[metric].append(float(v))
        g = row[5]
        if type(g) is int and g > 0:
            c["generated"] += g
    for c in cells.values():
        if KINDS[c["kind"]].sends_load and c["generated"] and _figure(c["wall_s"]):
            c["values"]["aggregate_tps"] = [c["generated"] / c["wall_s"]]
        if KINDS[c["kind"]].sends_load and c["values"].get("ttft_ms"):
            c["values"]["ttft_p90_ms"] = [percentile(c["values"]["ttft_ms"], 90)]


def _load_seconds(db, by_id: dict[int, dict], where_run: str) -> dict[tuple[int, str], list[float]]:
    """(run id, model) -> the seconds of its measured loads."""
    loads: dict[tuple[int, str], list[float]] = defaultdict(list)
    for ld in db.query(
            f"""select loads.run_id, loads.trigger, loads.origin, loads.sample_id, loads.load_seconds,
                      models.name as model, samples.kind as sample_kind
               from loads join models on models.id = loads.model_id
               left join samples on samples.id = loads.sample_id where loads.merged_into is null
               {where_run}"""):
        v = ld["load_seconds"]
        if ld["run_id"] in by_id and queries.is_measured_load(ld) and _figure(v):
            loads[(ld["run_id"], ld["model"])].append(float(v))
    return loads


def _point(c: dict, run: dict, loads: dict, conditions: dict) -> tuple[tuple, dict]:
    """A cell's (series key, point): its figures' spreads, its state and where its samples are shown."""
    kind = c["kind"]
    values = dict(c["values"])
    if kind == "measure":
        values["load_seconds"] = loads.get((run["id"], c["model"]), [])
    spreads = {m: _spread(values.get(m)) for m in KIND_METRICS[kind]}
    cls = c["prompt_class"] if kind == "measure" else (c["step_class"] or c["prompt_class"])
    step = {"streams": None, "depth_tokens": None, "rate_rps": None}
    if KINDS[kind].axis is not None:
        step[KINDS[kind].axis] = KINDS[kind].axis_value(c)
    key = (run["campaign_name"], c["model"], kind, step["streams"], step["depth_tokens"], step["rate_rps"], cls,
           bool(c["reasoning"]) if kind == "measure" else False)
    return key, {
        "run_id": run["id"], "started_at": run["started_at"], "status": run["status"],
        "server_build": run["server_build"], "cell_id": c["id"], "values": values, "spread": spreads,
        "state": _state(run, spreads["decode_tps"], values.get("decode_tps", []), kind, bool(c["refused_reason"])),
        "conditions": conditions,
        # where its samples are on the run's evidence page
        "anchor": f"cell-{c['id']}" if kind == "measure" else f"step-{c['step_id']}",
        "_campaign_id": run["campaign_id"],
    }


def _usable(points: list[dict], metric: str) -> list[int]:
    return [i for i, p in enumerate(points) if p["state"] == OK and p["values"].get(metric)]


def _step_key(series: dict, metric: str, usable: list[int], keyed: bool) -> tuple[str, tuple | None]:
    """The step search's seed for ``metric`` of ``series`` and its memo key (None where not ``keyed`` or a
    point was not made from a fingerprinted run: nothing to key it by, searched every time)."""
    points = series["points"]
    seed = f"{series['campaign']}|{series['model']}|{series['prompt_class']}|{series['reasoning']}|{metric}"
    if series["kind"] != MEASURE:
        seed += f"|{series['kind']}|{series['streams']}|{series['depth_tokens']}"
        if KINDS[series["kind"]].axis == "rate_rps":  # the seed of a load or depth step is as it always was
            seed += f"|{series['rate_rps']!r}"
    key = (seed, series["min_effect"], tuple((points[i]["run_id"], points[i]["_print"]) for i in usable)) \
        if keyed and all(points[i].get("_print") is not None for i in usable) else None
    return seed, key


def _steps(series: dict, metrics: list[str], memo: tuple[dict, dict] | None = None,
           judged: tuple[dict, dict] | None = None) -> list[dict]:
    """The steps of each metric of ``series``; ``memo`` (last build's, this build's) keeps the search's
    result for points whose runs' fingerprints are unchanged (see ``build_series``)."""
    points = series["points"]
    steps = []
    for metric in metrics:
        higher_better = METRICS[metric][1]
        usable = _usable(points, metric)
        seed, key = _step_key(series, metric, usable, memo is not None)
        found = memo[0].get(key) if key is not None else None
        # the verdicts of this series' candidates, kept per series: one whose steps came from the memo
        # keeps last build's, for the build that next adds a point to it
        last = judged[0].get(seed) if judged is not None else None
        last = last if isinstance(last, dict) else {}
        if found is None:
            used: dict = {}
            found = find_steps([points[i]["values"][metric] for i in usable], series["min_effect"], seed,
                               None if judged is None else (last, used))
            last = used
        if judged is not None:
            judged[1][seed] = last
        if key is not None:
            memo[1][key] = found
        for st in found:
            a, b = points[usable[st.before]], points[usable[st.after]]
            worse = (st.ratio < 1) == higher_better
            steps.append({
                "metric": metric, "before": a, "after": b, "ratio": st.ratio, "change": st.ratio - 1,
                "low": st.low - 1, "high": st.high - 1, "stayed": st.stayed, "regression": worse,
                "before_median": statistics.median(a["values"][metric]),
                "after_median": statistics.median(b["values"][metric]),
                "changes": moving(differences(a["conditions"], b["conditions"])),
                # runs between the two that could not carry the step (interrupted, unstable): shown, named
                "skipped": [p["run_id"] for p in points[usable[st.before] + 1:usable[st.after]]],
            })
    return steps
