"""A year of nightly runs: does the report step grow linearly, and is a publish after one new run quick?

Generates one database (bench/report_data.py: per run MODELS models x 6 cells
x 5 samples, a few thousand log lines with loads and facts, probes, rule
outcomes, canaries) and grows it through the sizes of ``--runs``. At each
size the report step renders every run from scratch into a fresh project, in
a process of its own so its peak memory is its own. Printed:

- per size: report step seconds, seconds per run, peak RSS; below the largest
  size also the peak RSS of the report step after one new run, which goal 5
  compares with the largest size's (within 1.2: the step's memory follows
  what it renders, not the runs in the store);
- the growth exponent of the report step (slope of log time over log runs;
  goal <= 1.1: linear);
- at the largest size: a rebuild with nothing changed (goal <= 2 s), the
  report step after one new run (goal <= 5 s), and with ``--site`` the site
  build: a first full one, then the whole publish after one new run (report
  step + site, goal <= 60 s). ``--nights`` (3) new runs are added and built
  one after another, as nightly runs are; each figure is printed and the
  goals are read from their median.

Every figure comes from this one run on this machine, printed beside the
load average (other work on the machine inflates all of them alike).

Measured 2026-12-06 on the 2-core session VM, while other work held its load
average at 10-20, after run fingerprints began to read every table the schema
gives a run and the store's record of writes with its salts
(report/fingerprints.py, report/row_owners.py):

    --runs '' --seed 300 --nights 2:  rebuild with nothing changed 0.13 s;
        after a write no page reads 1.95 s; one new run 23.2 / 17.7 s
    --runs '' --seed 1000 --nights 2: rebuild with nothing changed 0.19 s;
        after a write no page reads 2.21 s; one new run 16.4 / 17.7 s

The no-op goal (<= 2 s) holds at both sizes; the one-new-run times carry the
machine's load and are no verdict on the 5 s goal (compare against a baseline
measured in the same conditions before reading them).

    python bench/report_build.py [--runs 100,300,1000] [--models 10] [--site] [--seed 1000]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report_data import Generator  # noqa: E402

# Runs in a child process: its ru_maxrss is the report step's own peak (chart workers apart).
_STEP = """
import json, resource, sys, time
from pathlib import Path
from cardproof.report.build import build
db, project, site = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "1"
t = time.perf_counter()
# the whole report step as `cardproof report build --no-mkdocs` runs it: articles, exports, public database
written = build(db, project, run_mkdocs=False)["articles"]
report_s = time.perf_counter() - t
site_s = None
if site:
    from cardproof.report.site import mkdocs_build
    if sys.argv[4]:  # a seeded project: the placeholders get the anchors the new pages link (untimed)
        sys.path.insert(0, sys.argv[4])
        from report_build import anchor_placeholders
        anchor_placeholders(project / "site")
    t = time.perf_counter()
    mkdocs_build(project)
    site_s = time.perf_counter() - t
print(json.dumps({"report_s": report_s, "site_s": site_s, "files": len(written),
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

# Seeds a project as if every run had been rendered once: the real manifest (fingerprints and
# summaries from each run's real view) with placeholder pages, so the rebuilds that follow can be
# timed at sizes whose full rendering would take hours on a small shared machine.
_SEED = """
import sys
from pathlib import Path
from cardproof.report import build
db, project = Path(sys.argv[1]), Path(sys.argv[2])
build.scaffold(project)
class _Seeded:
    def context(self):
        return {"lead": {}}
build.article_view = lambda *a, **k: _Seeded()
build.render_run = build.render_evidence = lambda *a, **k: "seeded"
build.render_compare = lambda *a, **k: "seeded"
build.compare_runs = lambda db, a, b, views=None: {"a": {"id": a}, "b": {"id": b}, "rows": [],
                                                  "median_deviation": None}
build.write_articles(db, project)
"""


_ANCHOR_LINK = re.compile(r"\]\(([^)\s#:]+\.md)#([^)\s]+)\)")


def anchor_placeholders(site: Path) -> int:
    """Give each seeded placeholder page the anchors that real pages link to (the runs index, the month
    pages and the trend pages link cells and steps on evidence pages; ``mkdocs build --strict`` checks
    every such anchor). Returns the placeholders written."""
    wanted: dict[Path, set[str]] = {}
    for page in site.rglob("*.md"):
        text = page.read_text(encoding="utf-8")
        if text.startswith("seeded"):
            continue
        parts = page.name.split(".")
        lang = parts[-2] if len(parts) == 3 else None  # a page.de.md links page.md and lands on page.de.md
        for target, anchor in _ANCHOR_LINK.findall(text):
            path = (page.parent / target).resolve()
            if lang:
                path = path.with_name(f"{path.stem}.{lang}.md")
            wanted.setdefault(path, set()).add(anchor)
    n = 0
    for path, anchors in wanted.items():
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            continue
        new = "seeded\n\n" + "".join(f'<span id="{a}"></span>' for a in sorted(anchors)) + "\n"
        if text.startswith("seeded") and text != new:
            path.write_text(new, encoding="utf-8")
            n += 1
    return n


def generate(db_path: Path, runs: int, models: int) -> None:
    """``runs`` runs of ``models`` models into ``db_path`` (one campaign; kept for tests that size one article)."""
    Generator(db_path, models=models, campaigns=1).add(runs)


def step(db: Path, project: Path, *, site: bool = False, seeded: bool = False) -> dict:
    """One report step (and site build) in a fresh process; its times, files written and peak RSS.
    ``seeded``: placeholder pages get the anchors real pages link before the site build."""
    proc = subprocess.run([sys.executable, "-c", _STEP, str(db), str(project), "1" if site else "0",
                           str(Path(__file__).resolve().parent) if seeded else ""],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"report step failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def growth_exponent(points: list[tuple[int, float]]) -> float | None:
    """Least-squares slope of log(seconds) over log(runs): 1 is linear, 2 quadratic."""
    if len(points) < 2:
        return None
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(s) for _, s in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default="100,300,1000",
                    help="sizes rendered in full, comma-separated (default 100,300,1000; empty: none, with --seed)")
    ap.add_argument("--models", type=int, default=10)
    ap.add_argument("--campaigns", type=int, default=3)
    ap.add_argument("--log-lines", type=int, default=3000, help="server log lines per run")
    ap.add_argument("--site", action="store_true", help="also time the site build at the largest size")
    ap.add_argument("--seed", type=int, default=0,
                    help="time the no-op and one-new-run rebuilds at this many runs on a seeded project "
                         "(real manifest, placeholder pages) instead of after rendering every run")
    ap.add_argument("--work", type=Path, default=None, help="folder for the database and projects (kept)")
    ap.add_argument("--nights", type=int, default=3, help="new runs added and built one after another at the "
                    "largest size (the median counts)")
    args = ap.parse_args()
    sizes = sorted({int(x) for x in args.runs.split(",") if x.strip()})
    if not sizes and not args.seed:
        ap.error("--runs names no size and there is no --seed")
    work = args.work or Path(tempfile.mkdtemp(prefix="cardproof-report-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work folder {work}; {os.cpu_count()} CPUs; load average at start {load()}")
    gen = Generator(work / "bench.db", models=args.models, campaigns=args.campaigns, log_lines=args.log_lines)
    points = []
    night_rss: list[tuple[int, float]] = []  # (size, peak RSS of the report step after one new run)
    for n in sizes:
        t = time.perf_counter()
        gen.add(n - gen.runs)
        gen_s = time.perf_counter() - t
        project = work / f"proj-{n}"
        r = step(gen.path, project)
        points.append((n, r["report_s"]))
        print(f"{n:5d} runs: generated in {gen_s:.1f} s; report step {r['report_s']:.1f} s, "
              f"{r['report_s'] / n * 1000:.0f} ms per run, {r['files']} files, peak RSS {r['rss_mib']:.0f} MiB "
              f"(load {load()})", flush=True)
        if n != sizes[-1]:  # goal 5 compares the memory of a night's build across sizes (the largest: below)
            step(gen.path, project)  # the first build after a full one also makes what a nightly build keeps
            gen.add(1)
            r = step(gen.path, project)
            night_rss.append((n, r["rss_mib"]))
            print(f"{n:5d} runs + 1: report step {r['report_s']:.2f} s, peak RSS {r['rss_mib']:.0f} MiB", flush=True)
    exp = growth_exponent(points)
    if exp is not None:
        per_run = [s / n for n, s in points]
        print(f"growth exponent of the report step: {exp:.2f} (goal <= 1.1); "
              f"per-run cost from smallest to largest: x{per_run[-1] / per_run[0]:.2f} (goal within 1.2)")
    n = sizes[-1] if sizes else args.seed
    project = work / f"proj-{n}"
    if args.seed:
        n = args.seed
        gen.add(n - gen.runs)
        project = work / f"proj-{n}-seeded"
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", _SEED, str(gen.path), str(project)], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            raise SystemExit(f"seeding failed:\n{proc.stderr[-3000:]}")
        print(f"{n} runs: project seeded (real manifest, placeholder pages) in {time.perf_counter() - t:.0f} s")
    if args.site:
        r = step(gen.path, project, site=True, seeded=bool(args.seed))
        print(f"{n} runs: first full site build {r['site_s']:.1f} s (load {load()})", flush=True)
    r = step(gen.path, project)
    r = step(gen.path, project)  # the first one after seeding keeps the whole-table figures
    print(f"{n} runs: rebuild with nothing changed {r['report_s']:.2f} s, {r['files']} files written "
          f"(goal <= 2 s), peak RSS {r['rss_mib']:.0f} MiB")
    # a write no page reads (the daemon's heartbeat): the store's record moved, so every run's fingerprint
    # is read from the tables (report/fingerprints.py), and no page is written
    conn = sqlite3.connect(gen.path)
    with conn:
        conn.execute("insert into daemon_state (state, heartbeat_at) values ('idle', '2026-12-06T00:00:00+00:00')")
        conn.execute("update daemon_state set heartbeat_s = 2.0")
    conn.close()
    r = step(gen.path, project)
    print(f"{n} runs: rebuild after a write no page reads {r['report_s']:.2f} s, {r['files']} files written "
          f"(every run's fingerprint read from the store)", flush=True)
    # a night after a night: each of --nights new runs is added and built in turn (the first one after
    # seeding or a full build also makes what a nightly build keeps for the next one); the goal is read
    # from their median, and every figure is printed
    steps = []
    for night in range(1, args.nights + 1):
        gen.add(1)
        r = step(gen.path, project, site=args.site, seeded=bool(args.seed))
        steps.append(r)
        print(f"{n} runs + {night}: report step {r['report_s']:.2f} s, {r['files']} files written, "
              f"peak RSS {r['rss_mib']:.0f} MiB", flush=True)
        if args.site:
            print(f"{n} runs + {night}: site {r['site_s']:.1f} s; whole publish {r['report_s'] + r['site_s']:.1f} s",
                  flush=True)
    mid = sorted(steps, key=lambda r: r["report_s"])[len(steps) // 2]
    print(f"one new run at {n} runs, median of {len(steps)}: report step {mid['report_s']:.2f} s (goal <= 5 s: "
          f"{'met' if mid['report_s'] <= 5 else 'NOT met'}), peak RSS {max(r['rss_mib'] for r in steps):.0f} MiB")
    night_rss.append((n, max(r["rss_mib"] for r in steps)))
    if len(night_rss) > 1:
        (n0, m0), (n1, m1) = night_rss[0], night_rss[-1]
        print(f"peak RSS after one new run: {m0:.0f} MiB at {n0} runs, {m1:.0f} MiB at {n1} runs: x{m1 / m0:.2f} "
              f"(goal 5, memory not growing with the runs it does not render: within 1.2: "
              f"{'met' if m1 / m0 <= 1.2 else 'NOT met'})")
    if args.site:
        whole = sorted(r["report_s"] + r["site_s"] for r in steps)[len(steps) // 2]
        print(f"one new run at {n} runs, median of {len(steps)}: whole publish {whole:.1f} s (goal <= 60 s: "
              f"{'met' if whole <= 60 else 'NOT met'})")
    print(f"load average at the end {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
