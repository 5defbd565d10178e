"""Trend pages at a year of nightly runs: is the history step linear, and quick after one new run?

Generates (or reuses, from ``--dir``) one database per size of ``--runs``
with bench/report_data.py's generator (per run MODELS models x 6 cells x 5
samples and a measured load each, three campaigns; with ``--load-steps``
also a load and a depth sweep per model), then per size, in a process of its
own:

- the trend step from scratch: the series and steps (``trend_series``) and
  every trend page, chart and data file in both languages (``write_trends``)
  into a fresh project; the two parts are printed apart;
- at the largest size, the same step after one new run is stored (the
  project built before it reused: only pages whose series changed are made
  again), and once more with nothing changed.

Printed: seconds per size (wall clock and this process's CPU time, which
other work on a shared machine inflates less), seconds per run, the growth exponent (slope of
log time over log runs; goal <= 1.1), and the time after one new run (goal:
well inside the 5 s goal for the whole report step for one new run),
each beside the load average: other work on the machine inflates them all.

    python bench/history_build.py [--runs 100,300,1000] [--models 10] [--dir /tmp/g20] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _load() -> str:
    return "load average " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def _databases(sizes: list[int], folder: Path, models: int, load_steps: bool) -> dict[int, Path]:
    """One database per size, grown from the smallest; a size already in ``folder`` is reused."""
    sys.path.insert(0, str(HERE))
    from report_data import Generator

    tag = f"m{models}{'-steps' if load_steps else ''}"
    paths = {n: folder / f"history-{tag}-{n}.db" for n in sizes}
    if all(p.exists() for p in paths.values()):
        return paths
    grow = folder / f"history-{tag}-grow.db"
    grow.unlink(missing_ok=True)
    gen = Generator(grow, models=models, campaigns=3, log_lines=60 * models + 30 * models, seed=20)
    for n in sorted(sizes):
        start = gen.runs
        gen.add(n - gen.runs)
        if load_steps:
            from history_steps_data import add_steps
            add_steps(grow, since_run=start)
        shutil.copy(grow, paths[n])
        print(f"generated {n} runs ({_load()})", flush=True)
    grow.unlink(missing_ok=True)
    return paths


def _one(db: str, project: str) -> dict:
    """Child process: the trend step on ``db`` into ``project``; seconds of its parts."""
    from cardproof.daemon.store import open_store
    from cardproof.report.history.render import trend_series, write_trends

    store = open_store(Path(db), mode="ro")
    try:
        c0, t0 = time.process_time(), time.perf_counter()
        series = trend_series(store.db)
        t1 = time.perf_counter()
        written = write_trends(store.db, Path(project), series=series)
        c2, t2 = time.process_time(), time.perf_counter()
    finally:
        store.close()
    return {"series_s": t1 - t0, "pages_s": t2 - t1, "total_s": t2 - t0, "cpu_s": c2 - c0, "written": len(written),
            "points": sum(len(s["points"]) for s in series), "series": len(series)}


def _child(db: Path, project: Path) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", str(db), str(project)], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default="100,300,1000")
    ap.add_argument("--models", type=int, default=10)
    ap.add_argument("--dir", default=None, help="where the generated databases are kept and reused")
    ap.add_argument("--repeat", type=int, default=1, help="times each size is measured (the least is used)")
    ap.add_argument("--load-steps", action="store_true", help="a load and a depth sweep per model and run too")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_one(*args.child)))
        return
    sizes = sorted(int(n) for n in args.runs.split(","))
    folder = Path(args.dir or tempfile.mkdtemp(prefix="history-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    dbs = _databases(sizes, folder, args.models, args.load_steps)
    times = {}
    for n in sizes:
        best = None
        for _ in range(args.repeat):
            project = Path(tempfile.mkdtemp(prefix=f"history-{n}-", dir=folder))
            r = _child(dbs[n], project)
            shutil.rmtree(project)
            best = r if best is None or r["total_s"] < best["total_s"] else best
        times[n] = best["total_s"]
        print(f"{n:5d} runs: {best['total_s']:6.2f} s (series and steps {best['series_s']:.2f} s, pages "
              f"{best['pages_s']:.2f} s; CPU {best['cpu_s']:.2f} s; {best['series']} series, {best['points']} points, {best['written']} files)"
              f"  {best['total_s'] / n * 1000:.1f} ms/run  ({_load()})", flush=True)
    if len(sizes) > 1:
        xs = [math.log(n) for n in sizes]
        ys = [math.log(times[n]) for n in sizes]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        print(f"growth exponent {slope:.2f} (goal <= 1.1)  ({_load()})")
    # one new run on the largest: the project of a full build, then the database with one more run
    n = sizes[-1]
    project = Path(tempfile.mkdtemp(prefix=f"history-{n}-inc-", dir=folder))
    db = folder / f"history-inc-{n}.db"
    shutil.copy(dbs[n], db)
    _child(db, project)
    sys.path.insert(0, str(HERE))
    from report_data import Generator

    Generator(db, models=args.models, campaigns=3, log_lines=90 * args.models, seed=21).add(1)
    if args.load_steps:
        from history_steps_data import add_steps
        add_steps(db, since_run=n)
    one = _child(db, project)
    again = _child(db, project)
    print(f"after one new run: {one['total_s']:.2f} s (series and steps {one['series_s']:.2f} s, pages "
          f"{one['pages_s']:.2f} s, CPU {one['cpu_s']:.2f} s, {one['written']} files rewritten; goal well inside 5 s)"
          f"  ({_load()})")
    print(f"nothing changed:   {again['total_s']:.2f} s (CPU {again['cpu_s']:.2f} s, {again['written']} files "
          f"rewritten)  ({_load()})")
    shutil.rmtree(project)
    db.unlink()


if __name__ == "__main__":
    main()
