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

from cardproof.daemon.campaign_check import DEFAULT_MIN_EFFECT_PCT
from cardproof.daemon.load.stats import percentile

from .. import findings, queries
from ..gates import run_gate_config
from ..stats import Spread
from .conditions import _among, changed, model_conditions, run_conditions
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
#: streams, daemon/load/), a context-depth step
KIND_METRICS = {
    "measure": ["decode_tps", "prefill_tps", "ttft_ms", "load_seconds"],
    "load": ["decode_tps", "aggregate_tps", "ttft_ms", "ttft_p90_ms"],
    "rate": ["decode_tps", "aggregate_tps", "ttft_ms", "ttft_p90_ms"],  # an offered request rate (Poisson arrivals)
    "depth": ["decode_tps", "prefill_tps"],
}
#: a point in one of these states is shown but never starts or ends a step
OK = "ok"


def campaign_settings(toml_text: str | None) -> dict:
    """The frozen campaign's ``[report]`` limits (report/findings.py) and ``min_effect`` as a fraction.

    ``[report] min_effect_pct`` (default 5) is the smallest change a trend
    page calls a step. An unreadable frozen text gives the defaults.
    """
    limits = findings.report_limits(toml_text)
    return limits | {"min_effect": limits.get("min_effect_pct", DEFAULT_MIN_EFFECT_PCT) / 100}


def _figure(v) -> bool:
    """A value a series may hold: a finite positive number (a damaged row reads as NULL, report/tolerance.py)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def slug(text: str) -> str:
    """A file-name-safe, stable part of a page name (the full name stays on the page)."""
    s = re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")[:60]
    return s or "x"


def _state(run: dict, decode, decode_values: list[float], kind: str = "measure", refused: bool = False) -> str:
    if run["status"] != "completed":
        return str(run["status"] or "unknown")
    if refused:  # a depth the server's context cannot hold, refused before any request
        return "refused"
    if decode is None:
        return "no valid sample"
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


def _step_axis_value(c: dict) -> bool:
    """A load step has a positive number of streams, a rate step a positive finite offered rate, a depth
    step a positive depth (a damaged row has none)."""
    if c["kind"] == "rate":
        v = c["rate_rps"]
        return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf
    v = c["streams"] if c["kind"] == "load" else c["depth_tokens"]
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


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


def build_series(db, campaign: str | None = None, model: str | None = None, *, cache: dict | None = None,
                 prints: dict[int, str] | None = None, steps_memo: dict | None = None,
                 judged_memo: dict | None = None, series_cache: dict | None = None) -> list[dict]:
    """Every series (campaign × model × cell) with points in time order and steps per metric.

    A cell is a prompt class with reasoning on or off, a load step (its
    number of concurrent streams and prompt class) or a context-depth step
    (its depth in tokens); each kind has its metrics (``KIND_METRICS``).

    A point is one run's cell: its valid samples per metric (gates that
    exclude, errors left out), their spread, its state (``ok``, the run's
    status where it did not complete, ``unstable``, ``no valid sample``),
    its conditions and what changed since the previous point.

    ``cache`` (run id as text -> that run's points as made here; updated
    here) with ``prints`` (run id -> the run's fingerprint,
    report/fingerprints.py) keeps each run's points between builds: a
    build after one new run reads that run's samples, not a year of them.
    A run whose fingerprint differs from its entry is read again.

    ``steps_memo`` (with ``prints``): the steps found in each series and metric last time, keyed by
    everything they are computed from (the series, its minimum effect, the runs of its usable points
    with their fingerprints); replaced here by the entries this build used. The search is
    deterministic (a fixed seed per series), so a series the new run does not touch keeps its steps.
    ``judged_memo`` (with ``steps_memo``): per series and metric, the verdicts of the candidates its
    last search judged (``steps.find_steps``): a series the new run adds a point to judges again only
    the candidates next to it.
    """
    runs = [r for r in queries.runs(db) if campaign is None or r["campaign_name"] == campaign]
    if not runs:
        return []
    texts = {r["id"]: r["toml_text"] for r in db.query("select id, toml_text from campaigns")}
    settings_by_campaign: dict[int, dict] = {}
    by_sha: dict = {}  # a nightly campaign freezes the same text every night: read it once
    for r in runs:
        if r["campaign_id"] not in settings_by_campaign:
            key = r["campaign_sha256"] or r["campaign_id"]
            if key not in by_sha:
                by_sha[key] = campaign_settings(texts.get(r["campaign_id"]))
            settings_by_campaign[r["campaign_id"]] = by_sha[key]
        r["_limits"] = settings_by_campaign[r["campaign_id"]]
    caching = cache is not None and prints is not None and model is None
    by_campaign: dict[str, list[dict]] = defaultdict(list)
    for r in runs:
        by_campaign[r["campaign_name"]].append(r)
    # a campaign none of whose runs changed (the same runs, fingerprints and minimum effects as last time)
    # keeps its finished series, steps included: one new run makes only its own campaign's series again
    signature = {camp: repr([(r["id"], prints.get(r["id"]), settings_by_campaign[r["campaign_id"]]["min_effect"])
                             for r in camp_runs]) for camp, camp_runs in by_campaign.items()} if caching else {}
    reused: dict[str, list[dict]] = {}
    if caching and series_cache is not None and campaign is None:
        for camp, sig in signature.items():
            entry = series_cache.get(camp)
            if isinstance(entry, dict) and entry.get("sig") == sig and isinstance(entry.get("series"), list) \
                    and all(str(r["id"]) in cache for r in by_campaign[camp]):
                reused[camp] = entry["series"]
    kept: dict[int, list] = {}
    if caching:
        for r in runs:
            if r["campaign_name"] in reused:
                continue
            entry = cache.get(str(r["id"]))
            if isinstance(entry, dict) and entry.get("print") == prints.get(r["id"]) is not None:
                try:
                    kept[r["id"]] = _points_checked(entry, r)
                except (KeyError, TypeError, ValueError, AttributeError):
                    pass  # a damaged entry: the run is read again
    fresh = [r for r in runs if r["id"] not in kept and r["campaign_name"] not in reused]
    made = _run_points(db, fresh, model, restrict=len(fresh) < len(runs)) if fresh else {}
    if caching:
        for r in fresh:
            cache[str(r["id"])] = {"print": prints.get(r["id"]), "points": made.get(r["id"], []),
                                   "campaign": r["campaign_name"]}
        for rid in [k for k in cache if not k.isdigit() or int(k) not in {r["id"] for r in runs}]:
            if campaign is None:
                del cache[rid]  # a run no longer in the store
    grouped: dict[tuple, list[dict]] = defaultdict(list)
    for r in runs:
        if r["campaign_name"] in reused:
            continue
        print_ = prints.get(r["id"]) if caching else None
        for key, point in kept.get(r["id"]) or made.get(r["id"], []):
            if print_ is not None:
                point["_print"] = print_  # the run's data it was made from: the trend page's key uses it
            grouped[tuple(key)].append(point)
    out = []
    for (camp, mname, kind, streams, depth, rate, cls, reasoning), points in grouped.items():
        points.sort(key=lambda p: (p["started_at"] or "", p["run_id"]))
        for prev, p in zip([None, *points], points):
            p["changes"] = changed(prev["conditions"], p["conditions"]) if prev else []
        min_effect = settings_by_campaign[points[-1]["_campaign_id"]]["min_effect"]
        out.append({"campaign": camp, "model": mname, "prompt_class": cls, "reasoning": reasoning,
                    "kind": kind, "streams": streams, "depth_tokens": depth, "rate_rps": rate,
                    "metrics": KIND_METRICS[kind],
                    "page": f"trend-{slug(camp)}-{slug(mname)}", "min_effect": min_effect, "points": points})
    # prompt-class cells first (as before), then load steps by streams, offered rates, then depths
    order = {"measure": 0, "load": 1, "rate": 2, "depth": 3}
    out.sort(key=lambda s: (s["campaign"], s["model"], order[s["kind"]], s["streams"] or 0, s["rate_rps"] or 0,
                            s["depth_tokens"] or 0, s["reasoning"], s["prompt_class"]))
    seen_models = set()
    memo = {} if caching and steps_memo is not None else None
    judged = None if memo is None or judged_memo is None else (judged_memo, {})
    for s in out:
        # a load time belongs to the model, not the cell: its steps are told once, with the model's first cell
        first = (s["campaign"], s["model"]) not in seen_models
        seen_models.add((s["campaign"], s["model"]))
        s["steps"] = _steps(s, [m for m in s["metrics"] if first or m != "load_seconds"],
                            None if memo is None else (steps_memo, memo), judged)
    for series_list in reused.values():
        for s in series_list:
            s["page"] = f"trend-{slug(s['campaign'])}-{slug(s['model'])}"  # the base name: pages are assigned again
            if memo is not None:  # its memo entries stay for the build that next adds a run to it
                for seed, key in s.get("_memo_keys") or []:
                    if key is not None and key in steps_memo:
                        memo[key] = steps_memo[key]
                    if judged is not None and seed in judged_memo:
                        judged[1][seed] = judged_memo[seed]
    if memo is not None:
        steps_memo.clear()
        steps_memo.update(memo)  # only what this build used: the memo does not grow with old keys
    if judged is not None:
        judged_memo.clear()
        judged_memo.update(judged[1])
    if caching and series_cache is not None and campaign is None:
        made_now: dict[str, list[dict]] = defaultdict(list)
        for s in out:
            made_now[s["campaign"]].append(s)
        series_cache.clear()
        series_cache.update({camp: {"sig": signature[camp], "series": ss} for camp, ss in made_now.items()})
        series_cache.update({camp: {"sig": signature[camp], "series": ss} for camp, ss in reused.items()})
        out += [s for ss in reused.values() for s in ss]
        out.sort(key=lambda s: s["campaign"])  # stable: each campaign's own order stays
    return out


def _points_checked(entry: dict, run: dict) -> list[tuple]:
    """A run's cached points (as :func:`_run_points` made them), checked to be this run's."""
    points = entry["points"]
    if not isinstance(points, list):
        raise ValueError("no points")
    for key, p in points:
        if len(key) != 8 or key[2] not in KIND_METRICS or key[0] != run["campaign_name"] or p["run_id"] != run["id"] \
                or not isinstance(p["spread"], dict) or not isinstance(p["values"], dict):
            raise ValueError("cache entry of another run or kind")
    return points


def _run_points(db, runs: list[dict], model: str | None, restrict: bool) -> dict[int, list[tuple]]:
    """Run id -> [(series key, point)] for ``runs``: their cells, samples, loads and conditions.

    ``restrict`` reads only these runs' rows (by the run-id indexes); otherwise every row once.
    """
    by_id = {r["id"]: r for r in runs}
    ids = sorted(by_id)
    # a few runs are looked up by their ids; many (a first build) in one pass over each table
    def where_run(column: str) -> str:
        return _among(column, ids if restrict else None)

    excluded = _excluded_samples(db, runs, where_run("samples.run_id"))
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
               where coalesce(cells.kind, 'measure') in ('measure', 'load', 'rate', 'depth')
               {where_run("cells.run_id")}"""):
        if c["run_id"] not in by_id or (model is not None and c["model"] != model):
            continue
        if c["kind"] != "measure" and (c["step_id"] is None or not _step_axis_value(c)):
            continue  # a step cell without its step row (or its streams/depth) cannot be placed in a series
        c["values"] = defaultdict(list)
        c["generated"] = 0
        cells[c["id"]] = c
    # plain tuples and the figure test inline: this loop sees every sample of every run, the
    # largest part of building the series (a dict per row and a call per value cost as much again)
    columns = {"decode_tps": 2, "prefill_tps": 3, "ttft_ms": 4}
    plan = {kind: [(m, columns[m]) for m in ms if m in columns] for kind, ms in KIND_METRICS.items()}
    inf = math.inf
    for row in db.execute(
            f"""select cell_id, id, decode_tps, prefill_tps, ttft_ms, generated_tokens, error_kind,
                      coalesce(kind, 'measure') from samples
               where coalesce(kind, 'measure') in ('measure', 'load', 'rate', 'depth')
               {where_run("samples.run_id")} order by id"""):
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
        if c["kind"] in ("load", "rate") and c["generated"] and _figure(c["wall_s"]):
            c["values"]["aggregate_tps"] = [c["generated"] / c["wall_s"]]
        if c["kind"] in ("load", "rate") and c["values"].get("ttft_ms"):
            c["values"]["ttft_p90_ms"] = [percentile(c["values"]["ttft_ms"], 90)]
    loads: dict[tuple[int, str], list[float]] = defaultdict(list)
    for ld in db.query(
            f"""select loads.run_id, loads.trigger, loads.origin, loads.sample_id, loads.load_seconds,
                      models.name as model, samples.kind as sample_kind
               from loads join models on models.id = loads.model_id
               left join samples on samples.id = loads.sample_id where loads.merged_into is null
               {where_run("loads.run_id")}"""):
        v = ld["load_seconds"]
        if ld["run_id"] in by_id and queries.is_measured_load(ld) and _figure(v):
            loads[(ld["run_id"], ld["model"])].append(float(v))
    facts = model_conditions(db, ids if restrict else None)

    run_facts: dict[int, dict] = {}

    def of_run(run: dict) -> dict:  # the same for every cell of the run: made once
        if run["id"] not in run_facts:
            run_facts[run["id"]] = run_conditions(run)
        return run_facts[run["id"]]

    out: dict[int, list[tuple]] = defaultdict(list)
    for c in cells.values():
        run = by_id[c["run_id"]]
        kind = c["kind"]
        values = dict(c["values"])
        if kind == "measure":
            values["load_seconds"] = loads.get((run["id"], c["model"]), [])
        spreads = {m: _spread(values.get(m)) for m in KIND_METRICS[kind]}
        cls = c["prompt_class"] if kind == "measure" else (c["step_class"] or c["prompt_class"])
        streams = c["streams"] if kind == "load" else None
        depth = c["depth_tokens"] if kind == "depth" else None
        rate = float(c["rate_rps"]) if kind == "rate" else None
        out[run["id"]].append(((run["campaign_name"], c["model"], kind, streams, depth, rate, cls,
                                bool(c["reasoning"]) if kind == "measure" else False), {
            "run_id": run["id"], "started_at": run["started_at"], "status": run["status"],
            "server_build": run["server_build"], "cell_id": c["id"], "values": values, "spread": spreads,
            "state": _state(run, spreads["decode_tps"], values.get("decode_tps", []), kind,
                            bool(c["refused_reason"])),
            "conditions": of_run(run) | facts.get((run["id"], c["model"]), {}),
            # where its samples are on the run's evidence page
            "anchor": f"cell-{c['id']}" if kind == "measure" else f"step-{c['step_id']}",
            "_campaign_id": run["campaign_id"],
        }))
    return out


def _usable(points: list[dict], metric: str) -> list[int]:
    return [i for i, p in enumerate(points) if p["state"] == OK and p["values"].get(metric)]


def _step_key(series: dict, metric: str, usable: list[int], keyed: bool) -> tuple[str, tuple | None]:
    """The step search's seed for ``metric`` of ``series`` and its memo key (None where not ``keyed`` or a
    point was not made from a fingerprinted run: nothing to key it by, searched every time)."""
    points = series["points"]
    seed = f"{series['campaign']}|{series['model']}|{series['prompt_class']}|{series['reasoning']}|{metric}"
    if series["kind"] != "measure":
        seed += f"|{series['kind']}|{series['streams']}|{series['depth_tokens']}"
        if series["kind"] == "rate":
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
    if memo is not None:
        series["_memo_keys"] = []  # (seed, memo key) per metric: a cache file per campaign keeps its own
    for metric in metrics:
        higher_better = METRICS[metric][1]
        usable = _usable(points, metric)
        seed, key = _step_key(series, metric, usable, memo is not None)
        if memo is not None:
            series["_memo_keys"].append((seed, key))
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
                "changes": changed(a["conditions"], b["conditions"]),
                # runs between the two that could not carry the step (interrupted, unstable): shown, named
                "skipped": [p["run_id"] for p in points[usable[st.before] + 1:usable[st.after]]],
            })
    return steps
