"""The article's lead: what was asked and the scope of the answer, from the database alone."""

from __future__ import annotations

from datetime import datetime


def _seconds_between(a, b) -> float | None:
    try:
        return (datetime.fromisoformat(str(b)) - datetime.fromisoformat(str(a))).total_seconds()
    except (TypeError, ValueError):
        return None


def lead_view(view: dict, evidence: dict | None = None) -> dict:
    """Hardware, server, models (quantisation, file size, context), prompt classes with their token counts,
    repetitions, dates and duration of one run.

    Context sizes come from the load's log facts (``ctx_size``); a model
    whose log gave none has ``None``, shown as "not in the log".
    """
    ctx: dict[str, set] = {}
    for ld in (evidence or {}).get("loads", []):
        value = ld.get("facts", {}).get("ctx_size")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            ctx.setdefault(ld.get("model"), set()).add(int(value))
    # a single-model server states its context in /props; a router only per model, in its log
    props_ctx = (view.get("props") or {}).get("default_generation_settings", {})
    props_ctx = props_ctx.get("n_ctx") if isinstance(props_ctx, dict) else None
    models = [{"name": m["name"], "quantisation": m.get("quantisation"), "file_bytes": m.get("file_bytes"),
               "pinned": m.get("pinned"), "ctx": sorted(ctx.get(m["name"], ())) or ([int(props_ctx)] if isinstance(props_ctx, int)
                                                         and not isinstance(props_ctx, bool) else [])} for m in view["models"]]
    reps = sorted({c["repetitions"] for c in view["cells"] if c.get("repetitions")})
    run = view["run"]
    gpus = [g for g in view.get("gpus", {}).get("gpus", []) if g.get("name")]
    return {
        "gpus": gpus,
        "cpu_only": not gpus,
        "backend": run.get("backend"),
        "server_build": run.get("server_build"),
        "models": models,
        "classes": [{"name": cls, "tokens": view["class_tokens"].get(cls)} for cls in view["classes"]],
        "reasoning_modes": view["reasoning_modes"],
        "repetitions": reps,
        "started_at": run.get("started_at"),
        "ended_at": run.get("ended_at"),
        "duration_s": _seconds_between(run.get("started_at"), run.get("ended_at")),
    }
