"""The command line's structure: every command explained, every module importable on its own, no cycle."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import click

import cardproof
from cardproof import commands
from cardproof.cli import COMMAND_MODULES, cli


def _commands(group: click.Group, path: tuple[str, ...] = ()):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        yield path + (name,), cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, path + (name,))


def test_every_command_and_option_has_help_text():
    seen = list(_commands(cli))
    assert {" ".join(p) for p, _ in seen} >= {"run", "runs", "report build", "gates", "probes", "daemon run",
                                              "queue add", "status", "logs import", "loads", "compare", "merge"}
    missing = [" ".join(p) for p, cmd in seen if not (cmd.help or "").strip()]
    assert missing == []
    bare = [f"{' '.join(p)} {o.opts[0]}" for p, cmd in seen for o in cmd.params
            if isinstance(o, click.Option) and not o.hidden and not (o.help or "").strip()]
    assert bare == []


def test_shared_options_read_the_same_everywhere():
    """One --db, --run and --project, from commands/common.py: the commands that share them spell them alike."""
    from cardproof.commands.common import DB_HELP

    def option(path: str, flag: str) -> click.Option:
        cmd = dict((" ".join(p), c) for p, c in _commands(cli))[path]
        return next(o for o in cmd.params if flag in o.opts)

    for path in ("run", "runs", "report build", "gates", "probes", "rules show", "compare", "loads", "logs import"):
        assert option(path, "--db").help == DB_HELP, path
    for path in ("gates", "probes", "rules show"):
        assert option(path, "--run").help == "Run id (default: the latest run).", path
    assert option("report build", "--project").help == option("demo", "--project").help


def test_every_command_module_is_registered_and_none_imports_the_cli():
    root = Path(commands.__file__).parent
    with_register = {m.name for m in pkgutil.iter_modules([str(root)])
                     if "def register(" in (root / f"{m.name}.py").read_text()}
    assert {m.__name__.rsplit(".", 1)[1] for m in COMMAND_MODULES} == with_register
    for path in root.glob("*.py"):
        for node in ast.parse(path.read_text()).body:  # imports at module level: the ones that make a cycle
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "cardproof.cli" or n.startswith("cardproof.cli.") for n in names), path.name


def _all_modules() -> list[str]:
    names = []
    for package in ("cardproof", "cardproof.daemon", "cardproof.report"):
        module = importlib.import_module(package)
        names.append(package)
        names += [m.name for m in pkgutil.walk_packages(module.__path__, package + ".")
                  if not m.name.startswith(("cardproof.daemon", "cardproof.report")) or package != "cardproof"]
    return sorted(set(names))


def test_every_module_imports_first_in_a_fresh_interpreter():
    """Each module is imported as the first of ours (the others unloaded), so no order hides a cycle."""
    modules = _all_modules()
    assert len(modules) > 100 and "cardproof.daemon.migrations" in modules and "cardproof.cli" in modules
    script = (
        "import importlib, sys, traceback\n"
        "bad = []\n"
        "for name in sys.argv[1:]:\n"
        "    for loaded in [m for m in sys.modules if m == 'cardproof' or m.startswith('cardproof.')]:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception:\n"
        "        bad.append(name + ': ' + traceback.format_exc(limit=3).splitlines()[-1])\n"
        "print('\\n'.join(bad))\n"
        "sys.exit(1 if bad else 0)\n"
    )
    for order in (modules, modules[::-1]):
        done = subprocess.run([sys.executable, "-c", script, *order], capture_output=True, text=True, timeout=600,
                              cwd=Path(cardproof.__file__).parents[1])
        assert done.returncode == 0, done.stdout + done.stderr[-3000:]
