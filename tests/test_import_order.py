"""No import cycle: every module of the package imports first on a clean slate, and in random orders.

Runs in fresh interpreters (two at once, each taking half of the modules first). Before each "first" import every ``cardproof``
module is dropped from ``sys.modules``, so the module under test starts the
chain as it would in a new process (third-party libraries stay loaded,
which only saves time). A cycle shows as an ImportError naming a partially
initialised module; the registries' own imports (importlib) are covered too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"cardproof": ROOT / "cardproof", "cardproof.daemon": ROOT / "daemon", "cardproof.report": ROOT / "report"}

SCRIPT = r"""
import importlib, json, random, sys

names, seed, first = json.loads(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])

def clean():
    for m in [m for m in sys.modules if m == "cardproof" or m.startswith("cardproof.")]:
        del sys.modules[m]

failures = []
for name in first:
    clean()
    try:
        importlib.import_module(name)
    except Exception as exc:
        failures.append(f"{name} imported first: {type(exc).__name__}: {exc}")
for s in ((seed, seed + 1) if seed >= 0 else ()):
    clean()
    order = list(names)
    random.Random(s).shuffle(order)
    for name in order:
        try:
            importlib.import_module(name)
        except Exception as exc:
            failures.append(f"{name} in random order {s}: {type(exc).__name__}: {exc}")
            break
print(json.dumps(failures))
"""


def all_modules() -> list[str]:
    out = []
    for package, folder in PACKAGES.items():
        for f in sorted(folder.rglob("*.py")):
            parts = list(f.relative_to(folder).with_suffix("").parts)
            if package == "cardproof" and parts[0] in ("daemon", "report"):
                continue  # installed as cardproof.daemon / cardproof.report, listed from their own folders
            if parts[-1] == "__main__":
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out.append(".".join([package, *parts]))
    return out


def test_the_module_list_is_the_package():
    names = all_modules()
    assert len(names) > 150 and "cardproof.daemon.campaign.tables" in names and "cardproof.report.caveats" in names


@pytest.mark.parametrize("seed", [18])
def test_every_module_imports_first_and_in_random_orders(seed):
    names = all_modules()
    # two interpreters side by side, each importing half of the modules first (and one of them the two
    # random orders): the same checks in half the time on two cores
    halves = [(names[0::2], seed), (names[1::2], -1)]
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, json.dumps(names), str(s), json.dumps(first)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT / "tests")
             for first, s in halves]
    failures = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]
        failures += json.loads(out.strip().splitlines()[-1])
    assert failures == []
