"""A model's quality figures as the pass rules read them (``quality.kld_mean`` ...), from ``quality_checks``."""

from __future__ import annotations

import sqlite3

#: rule name -> the quality_checks column it reads (same_top in percent of positions, as llama-perplexity prints it)
RULE_NAMES = {"quality.kld_mean": "kld_mean", "quality.kld_p99": "kld_p99", "quality.same_top": "same_top",
              "quality.ppl_ratio": "ppl_ratio"}


def rule_values(conn, run_id: int, model_id: int) -> dict[str, float]:
    """The model's measured figures against its ladder's base; nothing for the base itself (it is the
    reference: nothing was measured against it) or for a model refused or failed."""
    try:
        row = conn.execute(f"select {', '.join(RULE_NAMES.values())} from quality_checks where run_id = ? "
                           "and model_id = ? and status = 'measured' and role != 'base' order by id desc limit 1",
                           [run_id, model_id]).fetchone()
    except sqlite3.OperationalError:  # a store from before m027
        return {}
    if row is None:
        return {}
    return {name: float(v) for name, v in zip(RULE_NAMES, row) if v is not None}
