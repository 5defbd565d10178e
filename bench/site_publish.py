"""Publishing one new run at a year of nightly runs: report step + site build (goal: <= 60 s at 1,000 runs).

Generates (or reuses) a database of ``--runs`` runs under ``--work`` (bench/report_data.py: real-shaped
runs with log lines, probes, canaries), renders every run once and builds the whole site once (the
baseline: what every publish cost before, a full ``mkdocs build --strict`` of every page). Then, ``--repeat``
times: one run is added and the whole publish is timed -- the report step and the site build, each in a
fresh process as ``cardproof report build`` runs them. A publish with nothing changed is timed too.

Printed: each figure, its ratio to the full build measured in this run, the number of pages, and the
load average (other work on a shared machine inflates every figure alike).

    python bench/site_publish.py [--runs 1000] [--repeat 3] [--work /tmp/f19/bench]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report_data import Generator  # noqa: E402

_REPORT = """
import json, sys, time
from pathlib import Path
from cardproof.report.build import scaffold, write_articles
db, project = Path(sys.argv[1]), Path(sys.argv[2])
scaffold(project)
t = time.perf_counter()
written = write_articles(db, project)
print(json.dumps({"seconds": time.perf_counter() - t, "files": len(written)}))
"""

_SITE = """
import json, sys, time
from pathlib import Path
from cardproof.report.site import mkdocs_build
t = time.perf_counter()
mkdocs_build(Path(sys.argv[1]), full=sys.argv[2] == "1")
print(json.dumps({"seconds": time.perf_counter() - t}))
"""


def _child(code: str, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"step failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def publish(db: Path, project: Path, *, full: bool = False) -> tuple[float, float]:
    """One publish: the report step, then the site build; their seconds."""
    report = _child(_REPORT, str(db), str(project))["seconds"]
    site = _child(_SITE, str(project), "1" if full else "0")["seconds"]
    return report, site


_RUN_ID = re.compile(r"(?<![0-9A-Za-z])(run-|compare-|-vs-)(\d+)(?!\d)")


def _shifted(text: str, shift: int, limit: int) -> str:
    """Every run id (``run-N``, ``compare-N``, ``-vs-N``) moved by ``shift``, unless that run is beyond ``limit``."""
    return _RUN_ID.sub(lambda m: f"{m.group(1)}{int(m.group(2)) + shift}" if int(m.group(2)) + shift <= limit
                       else m.group(0), text)


def clone_run(site: Path, src_id: int, new_id: int, limit: int) -> int:
    """Copy run ``src_id``'s pages, charts, downloads and comparison as run ``new_id`` (every run id in
    them shifted alike, so their links keep landing); the files written."""
    shift, n = new_id - src_id, 0
    for folder in (site / "runs", site / "runs" / "img", site / "compare", site / "compare" / "img"):
        for f in [*folder.glob(f"*run-{src_id}[-.]*"), *folder.glob(f"compare-{src_id}-*")]:
            m = _RUN_ID.search(f.name)
            if not m or int(m.group(2)) != src_id:
                continue
            dst = f.with_name(_shifted(f.name, shift, limit))
            if f.suffix == ".md":
                dst.write_text(_shifted(f.read_text(encoding="utf-8"), shift, limit), encoding="utf-8")
            else:
                dst.write_bytes(f.read_bytes())
            n += 1
    return n


def touch_index_pages(site: Path, new_id: int) -> None:
    """What the report step does to the pages above the runs when one is added: each names the new run."""
    for page in [site / "index.md", site / "index.de.md", *site.glob("*/index.md"), *site.glob("*/index.*.md")]:
        rel = "runs/" if page.parent == site else ("" if page.parent.name == "runs" else "../runs/")
        with page.open("a", encoding="utf-8") as f:
            f.write(f"\n- [run {new_id}]({rel}run-{new_id}.md)\n")


_ANCHOR = re.compile(r'id="([^"]+)"|\{#([^}\s]+)\}')  # an HTML id, or a heading's attribute list


def stub_evidence(site: Path, keep: Path) -> int:
    """Move every evidence page to ``keep`` and leave a stub with the same anchors in its place.

    Only the first, full build sees the stubs: a full build of a thousand runs' raw records takes the
    better part of an hour on a small machine, and a later publish never reads an unchanged page's
    Markdown (mkdocs' dirty build reads only pages newer than their HTML). ``restore_evidence`` puts
    the real pages back, older than their HTML, as a nightly site holds them."""
    n = 0
    for page in (site / "runs").glob("run-*-evidence*.md"):
        text = page.read_text(encoding="utf-8")
        dst = keep / page.name
        dst.parent.mkdir(parents=True, exist_ok=True)
        page.replace(dst)
        head = text.split("\n", 5)
        spans = "".join(f'<span id="{a}"></span>' for a in dict.fromkeys(x or y for x, y in _ANCHOR.findall(text)))
        page.write_text("\n".join(head[:5]) + "\n\n" + spans + "\n", encoding="utf-8")
        n += 1
    return n


def draw_missing_charts(site: Path) -> int:
    """A placeholder for each chart a page names that is not there (a report step stopped before its
    chart workers finished leaves such pages; mkdocs --strict refuses them)."""
    n = 0
    for page in [*site.glob("*.md"), *site.glob("*/*.md")]:
        if "-evidence" in page.name:
            continue
        for name in set(re.findall(r"\]\((img/[^)\s]+\.svg)", page.read_text(encoding="utf-8"))):
            target = page.parent / name
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>')
                n += 1
    return n


def write_missing_pages(site: Path) -> int:
    """A placeholder page, with the anchors asked for, for each page a link names that is not there (the
    trend pages and their index when the report step that rendered the project stopped early)."""
    wanted: dict[Path, set[str]] = {}
    for page in [*site.glob("*.md"), *site.glob("*/*.md")]:
        if "-evidence" in page.name:
            continue
        for target, anchor in re.findall(r"\]\(([^)\s#:]+\.md)(?:#([^)\s]+))?", page.read_text(encoding="utf-8")):
            path = (page.parent / target).resolve()
            if not path.exists():
                wanted.setdefault(path, set()).update([anchor] if anchor else [])
    for path, anchors in wanted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        spans = "".join(f'<span id="{a}"></span>' for a in sorted(anchors))
        path.write_text(f"# {path.stem}\n\n{spans}\n", encoding="utf-8")
    return len(wanted)


def restore_evidence(site: Path, keep: Path) -> None:
    old = time.time() - 86400
    for page in keep.glob("*.md"):
        dst = site / "runs" / page.name
        page.replace(dst)
        os.utime(dst, (old, old))


def cloned(args) -> int:
    """--clone: a project whose runs are copies of a rendered one's, grown to --runs; the site alone timed."""
    project = args.work / "proj"
    site = project / "site"
    if not site.is_dir():
        shutil.copytree(args.clone / "site", site)
        shutil.copy(args.clone / "mkdocs.yml", project / "mkdocs.yml")
    from cardproof.report.site import scaffold

    scaffold(project)  # the hooks and assets, as the report step gives them
    ids = sorted(int(m.group(1)) for p in (site / "runs").glob("run-*.md")
                 if (m := re.fullmatch(r"run-(\d+)\.md", p.name)))
    real = [i for i in ids if i <= args.real] if args.real else ids
    base = len(real)
    have = max(ids)
    t = time.perf_counter()
    for new_id in range(have + 1, args.runs + 1):
        clone_run(site, real[(new_id - 1) % base], new_id, args.runs)
    print(f"cloned runs {have + 1}..{args.runs} from {base} rendered ones in {time.perf_counter() - t:.0f} s",
          flush=True)
    drawn = draw_missing_charts(site) + write_missing_pages(site)
    if drawn:
        print(f"{drawn} charts and pages the rendered project lacks written as placeholders", flush=True)
    keep = args.work / "evidence-real"
    stubbed = stub_evidence(site, keep) if args.stub_evidence else 0
    site_s = _child(_SITE, str(project), "1")["seconds"]
    if stubbed:
        restore_evidence(site, keep)
    pages = len(list((project / "build" / "site").rglob("*.html")))
    size = (project / "build" / "site" / "search" / "search_index.json").stat().st_size / 2**20
    print(f"{args.runs} runs, {pages} pages: full site build (baseline) {site_s:.1f} s"
          f"{f', with {stubbed} evidence pages as stubs' if stubbed else ''}; search index {size:.1f} MiB "
          f"(load {load()})", flush=True)
    baseline = site_s
    s = _child(_SITE, str(project), "0")["seconds"]
    print(f"nothing changed: site {s:.1f} s, x{s / baseline:.2f} of the full build (load {load()})", flush=True)
    times = []
    for k in range(args.repeat):
        new_id = args.runs + 1 + k
        clone_run(site, real[(new_id - 1) % base], new_id, new_id)
        touch_index_pages(site, new_id)
        s = _child(_SITE, str(project), "0")["seconds"]
        times.append(s)
        print(f"{new_id} runs, one new: site {s:.1f} s, x{s / baseline:.2f} of the full build (load {load()})",
              flush=True)
    times.sort()
    print(f"site build after one new run: median {times[len(times) // 2]:.1f} s, worst {times[-1]:.1f} s; "
          f"add the report step's own figure (bench/report_build.py --seed {args.runs}); load at the end {load()}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--models", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3, help="runs added one at a time, each publish timed")
    ap.add_argument("--work", type=Path, default=Path("/tmp/f19/bench"),
                    help="folder for the database and project (kept and reused)")
    ap.add_argument("--clone", type=Path, default=None,
                    help="a project rendered by the report step: its runs are copied (ids shifted) up to --runs "
                         "and only the site build is timed")
    ap.add_argument("--stub-evidence", action="store_true",
                    help="with --clone: the first full build sees evidence pages as stubs with their anchors "
                         "(the baseline then understates a real full build)")
    ap.add_argument("--real", type=int, default=0, help="with --clone: copy only runs up to this id")
    args = ap.parse_args()
    if args.clone:
        args.work.mkdir(parents=True, exist_ok=True)
        return cloned(args)
    args.work.mkdir(parents=True, exist_ok=True)
    db, project = args.work / "bench.db", args.work / "proj"
    print(f"work folder {args.work}; {os.cpu_count()} CPUs; load average at start {load()}", flush=True)
    gen = Generator(db, models=args.models)
    if gen.runs < args.runs:
        t = time.perf_counter()
        gen.add(args.runs - gen.runs)
        print(f"generated up to {gen.runs} runs in {time.perf_counter() - t:.0f} s", flush=True)
    report, site = publish(db, project, full=True)
    pages = len(list((project / "build" / "site").rglob("*.html")))
    print(f"{gen.runs} runs, {pages} pages: report step {report:.1f} s; full site build (baseline) {site:.1f} s "
          f"(load {load()})", flush=True)
    baseline = site
    report, site = publish(db, project)
    print(f"nothing changed: report {report:.1f} s + site {site:.1f} s = {report + site:.1f} s, "
          f"x{(report + site) / baseline:.2f} of the full site build (load {load()})", flush=True)
    totals = []
    for _ in range(args.repeat):
        gen.add(1)
        report, site = publish(db, project)
        totals.append(report + site)
        print(f"{gen.runs} runs, one new: report {report:.1f} s + site {site:.1f} s = {report + site:.1f} s "
              f"(goal <= 60 s), x{(report + site) / baseline:.2f} of the full site build (load {load()})",
              flush=True)
    totals.sort()
    print(f"whole publish after one new run: median {totals[len(totals) // 2]:.1f} s, "
          f"worst {totals[-1]:.1f} s of {len(totals)}; load average at the end {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
