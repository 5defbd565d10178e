"""report/ in layers: a module imports only from its own layer or the layers below it.

Read bottom-up, the publish side is: text and escaping; queries and typed
views (including the caveat, contradiction and finding rules, which turn a
view into message ids and values and render nothing); sections and charts;
pages (article, evidence, trends, index, feed, downloads); the build on top.
Every import counts, at module level or inside a function, under
TYPE_CHECKING or not: a late import is still a dependency, only a hidden one.
A new module must be placed in a layer here, so its place is a decision.

The imports are read by Python's own parser from the source files; nothing
is imported, so a cycle cannot hide behind import order.
"""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

import pytest
from source_trees import parsed

ROOT = Path(__file__).resolve().parents[1]

#: layer (bottom first) -> module patterns, relative to cardproof.report
REPORT_LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("text and escaping", ("", "privacy", "mdsafe", "i18n", "csvsafe", "stats",
                           "tolerance", "chart_draw", "scaffold", "scaffold.*", "serve", "site_settings",
                           "cell_kinds", "data_words", "figures")),
    ("queries and views", ("queries", "gates", "findings", "findings.*", "fingerprints", "row_owners", "provenance", "lead",
                           "evidence", "expectations", "fit", "memory", "energy", "probes", "reconcile", "compare",
                           "llama_bench", "history", "history.conditions", "history.steps", "history.series",
                           "history.cache_json",
                           "history.llama_bench", "caveats", "caveats.*", "contradictions", "contradictions.*",
                           "axes", "views", "summaries", "summary", "setup", "variants", "quality", "run_order")),
    ("sections and charts", ("charts", "axes_charts", "article_parts", "observations", "history.numbers",
                             "history.svg", "history.tables", "history.chart", "findings.show",
                             "statements")),
    ("pages", ("render", "observed", "feed", "exports", "home", "site", "site_build", "lead_steps", "addenda",
               "history.render", "history.pages")),
    ("build", ("build",)),
]

#: (importer, imported package): the one kind of upward import allowed, and why. The catalogue
#: (i18n) is compiled once, at import, from the .po and the German each rule module carries beside
#: its rule (a rule is one module: check, order, both languages); it reads those tables, it never
#: runs a rule.
CATALOGUE_READS = {("i18n", "caveats"), ("i18n", "findings")}


def _modules(folder: Path, package: str) -> dict[str, Path]:
    out = {}
    for f in folder.rglob("*.py"):
        parts = list(f.relative_to(folder).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def _rel(dotted: str, package: str) -> str | None:
    if dotted == package:
        return ""
    return dotted[len(package) + 1:] if dotted.startswith(package + ".") else None


def _imports(name: str, path: Path, modules: dict[str, Path], package: str) -> set[str]:
    """Modules of the package that ``name`` imports (relative names, '' for the package)."""
    is_pkg = path.name == "__init__.py"
    found = set()
    for node in ast.walk(parsed(path)):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                here = name.split(".") if name else []
                base = here if is_pkg else here[:-1]
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                mod = ".".join(base + ([node.module] if node.module else []))
                prefix = package + ("." + mod if mod else "")
            else:
                prefix = node.module or ""
            # `from pkg import sub` names the submodule; `from pkg import thing` the package itself
            targets = [f"{prefix}.{a.name}" if _rel(f"{prefix}.{a.name}", package) in modules else prefix
                       for a in node.names]
        for t in targets:
            if t != package and not t.startswith(package + "."):
                continue
            rel = t[len(package) + 1:] if t != package else ""
            while rel not in modules and rel:
                rel = rel.rpartition(".")[0]
            if rel != name and (rel in modules):
                found.add(rel)
    return found


def _placed(name: str, layers) -> int | None:
    """The layer of ``name``: an exact pattern wins over a wildcard (findings.show over findings.*)."""
    exact = [i for i, (_, pats) in enumerate(layers) if name in pats]
    if exact:
        return exact[0]
    wild = [i for i, (_, pats) in enumerate(layers) if any(fnmatch.fnmatchcase(name, p) for p in pats)]
    return wild[0] if len(wild) == 1 else None


REPORT = _modules(ROOT / "report", "cardproof.report")


def test_every_report_module_has_one_layer():
    unplaced = sorted(m or "(package)" for m in REPORT if _placed(m, REPORT_LAYERS) is None)
    assert not unplaced, f"place these modules in REPORT_LAYERS (tests/test_import_layers.py): {unplaced}"


@pytest.mark.parametrize("name", sorted(REPORT))
def test_report_module_imports_nothing_above_its_layer(name):
    mine = _placed(name, REPORT_LAYERS)
    assert mine is not None
    upward = []
    for dep in sorted(_imports(name, REPORT[name], REPORT, "cardproof.report")):
        theirs = _placed(dep, REPORT_LAYERS)
        if theirs is not None and theirs > mine and (name, dep.split(".")[0]) not in CATALOGUE_READS:
            upward.append(f"{dep} ({REPORT_LAYERS[theirs][0]})")
    assert not upward, f"{name} ({REPORT_LAYERS[mine][0]}) imports from above its layer: {upward}"


def _cycles(modules: dict[str, Path], package: str) -> list[list[str]]:
    graph = {m: _imports(m, p, modules, package) for m, p in modules.items()}
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def _outside_package_inits(cycle: list[str], modules: dict[str, Path]) -> bool:
    """A registry package importing its plug-ins, which import its base from it, is the one allowed loop."""
    inits = [m for m in cycle if modules[m].name == "__init__.py"]
    return not (len(inits) == 1 and all(m.startswith(inits[0] + ".") or m == inits[0] for m in cycle))


@pytest.mark.parametrize("folder,package", [("report", "cardproof.report"), ("daemon", "cardproof.daemon")])
def test_no_import_cycle_outside_package_inits(folder, package):
    modules = _modules(ROOT / folder, package)
    cycles = [c for c in _cycles(modules, package) if _outside_package_inits(c, modules)]
    assert not cycles, f"import cycles in {folder}/: {cycles}"


def test_the_layer_check_sees_late_and_type_checking_imports(tmp_path):
    """The checker itself: a late import and a TYPE_CHECKING import are both found, so both can fail."""
    pkg = tmp_path / "p"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def f():\n    from .high import x\n")
    (pkg / "high.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import low\n")
    (pkg / "sub" / "__init__.py").write_text("from ..low import f\n")
    mods = _modules(pkg, "p")
    assert _imports("low", mods["low"], mods, "p") == {"high"}
    assert _imports("high", mods["high"], mods, "p") == {"low"}
    assert _imports("sub", mods["sub"], mods, "p") == {"low"}
    assert _cycles(mods, "p") == [["high", "low"]]


#: the run side, bottom first: a run's record and context; the steps participants call; the participants;
#: the runner, whose phases call the participants; the service that starts runs. Every other daemon
#: module is a library below all of them (store, backends, logs, gates ...) and imports none of them.
RUNNER_LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("run record and context", ("run.context", "run.record", "run.loads")),
    ("participants' steps", ("run.load.run", "run.load.fit", "run.probes", "run.canaries", "run.variants.run",
                              "run.quality")),
    ("participants", ("run.participants",)),
    ("runner", ("run.runner",)),
    ("service", ("service", "service.*")),
]

DAEMON = _modules(ROOT / "daemon", "cardproof.daemon")


@pytest.mark.parametrize("name", sorted(DAEMON))
def test_daemon_module_imports_nothing_above_its_place_in_the_run(name):
    """A library imports no run module; a step no participant; a participant not the runner; the runner
    no service. So the runner's cell loop can only reach a step through the participants' phases."""
    mine = _placed(name, RUNNER_LAYERS)
    upward = []
    for dep in sorted(_imports(name, DAEMON[name], DAEMON, "cardproof.daemon")):
        theirs = _placed(dep, RUNNER_LAYERS)
        if theirs is not None and (mine is None or theirs > mine):
            upward.append(f"{dep} ({RUNNER_LAYERS[theirs][0]})")
    where = RUNNER_LAYERS[mine][0] if mine is not None else "library"
    assert not upward, f"{name} ({where}) imports from above its place: {upward}"


def test_the_runner_reaches_its_steps_only_through_the_participants():
    """The runner imports no step (axes, probes, canaries, fit, variants): the phases call them."""
    steps = set(RUNNER_LAYERS[1][1])
    assert not _imports("run.runner", DAEMON["run.runner"], DAEMON, "cardproof.daemon") & steps
    assert steps <= _imports("run.participants", DAEMON["run.participants"], DAEMON, "cardproof.daemon")


#: daemon/ as folders, bottom first: a folder imports only from its own layer or the layers below it.
#: The store owns the schema and every read of it; the machine is what runs beside the store (the
#: inference server's files and binary, the host, its memory and energy); then the servers as cardproof
#: talks to them and reads their logs; the checks made of a sample (gates, probes); the campaign, which
#: names those checks and is read once; the run, which measures a campaign; the service, which starts runs.
DAEMON_LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("store", ("store",)),
    ("the machine", ("server", "host", "memory", "energy")),
    ("servers and their logs", ("backends", "logs", "quality")),
    ("checks", ("gates", "probes")),
    ("campaign", ("campaign",)),
    ("run", ("run",)),
    ("service", ("service",)),
]


def _folder(name: str) -> str:
    return name.split(".")[0]


def _folder_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in DAEMON.items():
        if not name:
            continue
        for dep in _imports(name, path, DAEMON, "cardproof.daemon"):
            if dep and _folder(dep) != _folder(name):
                graph.setdefault(_folder(name), set()).add(_folder(dep))
    return graph


def test_every_daemon_module_sits_in_a_layer_folder():
    """No module lies loose at the top of daemon/: its folder is its layer."""
    loose = sorted(m for m, p in DAEMON.items() if m and "." not in m and p.name != "__init__.py")
    assert not loose, f"move these into a layer folder of daemon/: {loose}"
    unplaced = sorted({_folder(m) for m in DAEMON if m} - {f for _, fs in DAEMON_LAYERS for f in fs})
    assert not unplaced, f"place these folders in DAEMON_LAYERS (tests/test_import_layers.py): {unplaced}"


@pytest.mark.parametrize("folder", sorted({_folder(m) for m in DAEMON if m}))
def test_daemon_folder_imports_nothing_above_its_layer(folder):
    mine = _placed(folder, DAEMON_LAYERS)
    assert mine is not None
    upward = []
    for name, path in sorted(DAEMON.items()):
        if name and _folder(name) == folder:
            for dep in sorted(_imports(name, path, DAEMON, "cardproof.daemon")):
                theirs = _placed(_folder(dep), DAEMON_LAYERS) if dep else None
                if theirs is not None and theirs > mine:
                    upward.append(f"{name} -> {dep} ({DAEMON_LAYERS[theirs][0]})")
    assert not upward, f"daemon/{folder}/ ({DAEMON_LAYERS[mine][0]}) imports from above its layer: {upward}"


def test_no_folder_level_import_loop_in_daemon():
    """Two folders that import each other are one layer in two places: the loop is the bug."""
    graph = _folder_graph()
    loops = []
    for a, deps in graph.items():
        for b in deps:
            seen, todo = set(), [b]
            while todo:
                x = todo.pop()
                for y in graph.get(x, ()):
                    if y not in seen:
                        seen.add(y)
                        todo.append(y)
            if a in seen:
                loops.append(f"{a} <-> {b}")
    assert not loops, f"folder-level import loops in daemon/: {sorted(loops)}"


def test_every_package_folder_is_listed_in_pyproject():
    """A layer folder left out of pyproject.toml's packages is missing from the wheel, though an
    editable install still finds it."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = set()
    for folder, package in (("cardproof", "cardproof"), ("daemon", "cardproof.daemon"), ("report", "cardproof.report")):
        for init in (ROOT / folder).rglob("__init__.py"):
            found.add(".".join((package, *init.parent.relative_to(ROOT / folder).parts)))
    assert not found - listed, f"list these packages in pyproject.toml: {sorted(found - listed)}"
