"""llama-bench imports as series of their own on a model's trend page.

llama-bench measures inside one process (no HTTP, no chat template), so its
figures are never mixed into the server's series or steps: a ``tg`` test is
drawn beside decode, a ``pp`` test beside prefill, each as its own line.
A result belongs to a model by the rule of the llama-bench section
(report/llama_bench.py): the model's name is part of the file name.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import PurePath

from ..stats import spread
from cardproof.daemon.store import json_value

#: llama-bench test name -> the server metric it is drawn beside
_TEST = re.compile(r"^(pp|tg)(\d+)$")
_METRIC = {"pp": "prefill_tps", "tg": "decode_tps"}


def bench_series(db, model_names: list[str]) -> dict[str, dict[str, list[dict]]]:
    """model -> metric -> points (test, date, build, spread of samples_ts), oldest first.

    Rows whose samples cannot be read are skipped (the import named them).
    """
    if "llama_bench_results" not in db.table_names() or not model_names:
        return {}
    out: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in db.query("""select r.id, r.test, r.test_time, r.build_commit, r.model_filename, r.samples_ts_json,
                                i.imported_at from llama_bench_results r
                         join llama_bench_imports i on i.id = r.import_id order by r.id"""):
        m = _TEST.match(str(r["test"] or ""))
        name = PurePath(str(r["model_filename"] or "")).name
        owners = [n for n in model_names if n and n in name]
        if not m or not owners:
            continue
        values = [v for v in json_value(r["samples_ts_json"], list, [])
                  if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0]
        s = spread(values)
        if s is None:
            continue
        point = {"id": r["id"], "test": r["test"], "date": r["test_time"] or r["imported_at"],
                 "build": r["build_commit"], "spread": s}
        for owner in owners:
            out[owner][_METRIC[m.group(1)]].append(point)
    for per_metric in out.values():
        for points in per_metric.values():
            points.sort(key=lambda p: (str(p["date"] or ""), p["id"]))
    return {k: dict(v) for k, v in out.items()}
