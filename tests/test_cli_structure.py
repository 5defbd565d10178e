"""The command line's structure: every command explained, every module importable on its own, no cycle."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import click

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


# Each module imported first in a fresh interpreter, and in random orders: tests/test_import_order.py
