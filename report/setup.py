"""The article's Setup section, its last: everything someone re-running the run needs, from rows alone.

The machine and the server process as the run recorded them when it started
(``run_setup``, daemon/host/setup.py), each load's command line as the server's
log printed it and the settings its log states (flash attention, batch and
micro-batch, parallel slots, KV cache types, threads, context), each model
file with its size, SHA-256 and origin, the order the run went in, the
machine's load average at its start and end, and the commands that repeat it.
What was not recorded (a run from before the table, a server on another
machine) is said to be missing, never filled in.

In short, ``setup.py``: the article's last section, Setup
(``templates/sections/setup.md.j2``): the run's ``run_setup`` row, each load's command line as the
router's log printed it (one argument a line after ``spawning server instance with args:``) and the
settings its log states (flash attention, batch/ubatch, slots, KV types, threads, context, layers on
a card, speculative decoding), the model files with size, SHA-256 and origin, the run order
(consecutive requests of one model and kind as one step), the load average flagged where it passed
the CPUs, and the commands that repeat the run
"""

from __future__ import annotations

import re
import shlex

from cardproof.daemon.campaign.evidence import KERNEL_FLAGS
from cardproof.daemon.store import json_value
from cardproof.marks import N_

#: llama-server's router prints a child's command line one argument per line after this line
_ARGS_HEAD = "spawning server instance with args:"
_ARG = re.compile(r"\bload: {3}(\S.*)$")
#: the load settings the section names, by the fact that states each (daemon/logs/parsers/)
SETTINGS = ("flash_attn", "n_batch", "n_ubatch", "slots", "kv_cache_type_k", "kv_cache_type_v", "n_threads",
            "n_threads_batch", "ctx_size", "offloaded_layers", "total_layers", "spec_type", "draft_model")


def _row(db, run_id: int) -> dict | None:
    if "run_setup" not in db.table_names():
        return None  # a store from before m026 opened read-only
    return next(iter(db.query("select * from run_setup where run_id = ? order by id desc limit 1", [run_id])), None)


def _command_lines(db, load_ids: list[int]) -> dict[int, dict]:
    """load id -> ``{"text", "line_id"}``: the command line its log printed (a router's child), joined."""
    if not load_ids:
        return {}
    marks = ", ".join("?" * len(load_ids))
    out: dict[int, dict] = {}
    collecting: dict | None = None
    for line_id, load_id, raw in db.execute(
            f"select id, load_id, raw from log_lines where load_id in ({marks}) order by id", load_ids).fetchall():
        raw = raw or ""
        if _ARGS_HEAD in raw:
            collecting = {"load": load_id, "args": [], "line_id": line_id}
            continue
        m = _ARG.search(raw) if collecting and collecting["load"] == load_id else None
        if m:
            collecting["args"].append(m[1])
            continue
        if collecting and collecting["args"] and collecting["load"] not in out:
            out[collecting["load"]] = {"text": shlex.join(collecting["args"]), "line_id": collecting["line_id"]}
        collecting = None
    if collecting and collecting["args"] and collecting["load"] not in out:
        out[collecting["load"]] = {"text": shlex.join(collecting["args"]), "line_id": collecting["line_id"]}
    return out


def _tool_commands(db, run_id: int) -> dict[int, str]:
    """load id -> the command a measuring tool ran as that load (llama-perplexity for ``[quality]``), as the run
    stored it: such a load is no server's, so its log prints no server command line."""
    try:
        rows = db.execute("select load_id, binary, args_json from quality_checks where run_id = ? and load_id is not "
                          "null and binary is not null", [run_id]).fetchall()
    except Exception as exc:  # noqa: BLE001 -- a store from before the table: no tool ran
        if "no such table" in str(exc):
            return {}
        raise
    out = {}
    for load_id, binary, args in rows:
        args = json_value(args, list, None)
        if args is not None:
            out[load_id] = shlex.join([str(binary), *(str(a) for a in args)])
    return out


def command_line_ids(conn, load_id: int) -> list[int]:
    """The ids of the lines a router printed a load's command line in (the head and each argument), so the
    evidence page prints what the Setup section links to."""
    head = conn.execute("select id from log_lines where load_id = ? and raw like ? order by id limit 1",
                        [load_id, f"%{_ARGS_HEAD}%"]).fetchone()
    if head is None:
        return []
    ids = [head[0]]
    for line_id, raw in conn.execute("select id, raw from log_lines where load_id = ? and id > ? order by id limit 400",
                                     [load_id, head[0]]).fetchall():
        if not _ARG.search(raw or ""):
            break
        ids.append(line_id)
    return ids


def _order(db, run_id: int) -> list[dict]:
    """What the run did, in the order it did it: consecutive requests of one model and kind as one step."""
    events = [(r[0], r[1], r[2] or "measure") for r in db.execute(
        "select s.started_at, m.name, s.kind from samples s join cells c on c.id = s.cell_id "
        "join models m on m.id = c.model_id where s.run_id = ? order by s.id", [run_id]).fetchall()]
    if "probe_results" in db.table_names():
        events += [(r[0], r[1], "probe") for r in db.execute(
            "select p.at, m.name from probe_results p join models m on m.id = p.model_id where p.run_id = ? "
            "order by p.id", [run_id]).fetchall()]
    events.sort(key=lambda e: str(e[0] or ""))
    steps: list[dict] = []
    for _at, model, kind in events:
        kind = KIND_LABEL.get(kind, kind)
        if steps and steps[-1]["model"] == model and steps[-1]["kind"] == kind:
            steps[-1]["n"] += 1
        else:
            steps.append({"model": model, "kind": kind, "n": 1})
    return steps


#: what each kind of request is called in the run order (English message ids; German in the catalogue)
KIND_LABEL = {"measure": N_("measured samples"), "canary": N_("canary samples"), "load": N_("concurrency steps' requests"),
              "rate": N_("rate steps' requests"), "depth": N_("depth steps' requests"), "probe": N_("probe tasks")}


def _busy(load: dict | None, cpus: int | None) -> bool | None:
    """Whether the machine had more runnable work than CPUs at that moment (None where unknown)."""
    if not load or not cpus:
        return None
    return max(load.get("one") or 0, load.get("five") or 0) > cpus


def setup_view(db, view: dict) -> dict:
    """Everything the Setup section prints (``view``: the run view with ``evidence`` built)."""
    run = view["run"]
    row = _row(db, run["id"]) or {}
    flags = (row.get("cpu_flags") or "").split()
    loads = [ld for ld in (view.get("evidence") or {}).get("loads", []) if ld.get("facts") is not None]
    commands = _command_lines(db, [ld["id"] for ld in loads])
    tools = _tool_commands(db, run["id"])
    cmdline = json_value(row.get("server_cmdline_json"), list, [])
    start, end = json_value(row.get("load_start_json"), dict, {}), json_value(row.get("load_end_json"), dict, {})
    cpus = row.get("usable_cpus") or row.get("cpu_threads")
    models = json_value(row.get("models_json"), list, [])
    requantized = _requantized(run.get("campaign_text"))
    for m in models:
        m["made_from"] = requantized.get(m.get("name"))
        command = (m.get("origin") or {}).get("command")
        m["derivation"] = shlex.join(str(a) for a in command) if isinstance(command, list) else None
    build = str(run.get("server_build") or "")
    return {
        "recorded": bool(row),
        # llama.cpp built outside its git tree reports build 0 ("b0-unknown", "0 (unknown)"): no version at all
        "build_reported": bool(build) and not re.match(r"^b?0\b|^unknown", build),
        "cpu_model": row.get("cpu_model"),
        "kernel_flags": [f for f in KERNEL_FLAGS if f in flags],
        "flags_count": len(flags),
        "cpu_flags": " ".join(flags),
        "cores": row.get("cpu_cores"), "threads": row.get("cpu_threads"), "usable_cpus": row.get("usable_cpus"),
        "ram_bytes": row.get("ram_bytes"),
        "server_exe": row.get("server_exe"), "server_sha256": row.get("server_sha256"),
        "server_package": row.get("server_package"),
        "server_cmdline": shlex.join(cmdline) if cmdline else None,
        "loads": [{"id": ld["id"], "model": ld.get("model"), "command": commands.get(ld["id"]),
                   "tool_command": tools.get(ld["id"]),
                   "settings": {k: ld["facts"].get(k) for k in SETTINGS if ld["facts"].get(k) is not None}}
                  for ld in loads],
        "models": models,
        "order": _order(db, run["id"]),
        "load_start": start or None, "load_end": end or None,
        "busy": bool(_busy(start, cpus) or _busy(end, cpus)), "cpus": cpus,
        "rerun": f"cardproof rerun {run['id']}",
    }


def _requantized(campaign_text: str | None) -> dict[str, str]:
    from .findings.inputs import requantized

    return requantized(campaign_text)
