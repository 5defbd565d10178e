"""The command line's structure: every command explained, every module importable on its own, no cycle."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import click
from click.testing import CliRunner

from cardproof import commands
from cardproof.cli import COMMAND_MODULES, cli
from source_trees import parsed


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
    with_commands = {m.name for m in pkgutil.iter_modules([str(root)])
                     if "\nCOMMANDS = " in (root / f"{m.name}.py").read_text()}
    assert {m.__name__.rsplit(".", 1)[1] for m in COMMAND_MODULES} == with_commands
    ctx = click.Context(cli)
    registered = {cli.get_command(ctx, n) for n in cli.list_commands(ctx)}
    assert {c for m in COMMAND_MODULES for c in m.COMMANDS} == registered
    for path in root.glob("*.py"):
        tree = parsed(path)
        for node in tree.body:  # imports at module level: the ones that make a cycle
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "cardproof.cli" or n.startswith("cardproof.cli.") for n in names), path.name
        # a command is defined at module level, where a reader can import it, not inside a function
        nested = [f"{path.name}:{inner.lineno}" for outer in ast.walk(tree) if isinstance(outer, ast.FunctionDef)
                  for inner in ast.walk(outer) if inner is not outer and isinstance(inner, ast.FunctionDef)
                  and any("command" in ast.unparse(d) or "group" in ast.unparse(d) for d in inner.decorator_list)]
        assert nested == []


#: every command ``cardproof --help`` (and its groups' help) listed when the commands were closures inside
#: ``register(cli)`` functions: moving them to module level kept each one
COMMANDS_BEFORE = {
    "compare", "daemon", "daemon example-config", "daemon install-unit", "daemon run", "demo", "gates", "history",
    "import", "import llama-bench", "loads", "logs", "logs import", "logs show", "merge", "models", "models fetch",
    "models make-tiny", "probes", "publish", "queue", "queue add", "queue cancel", "queue list", "register",
    "report", "report build", "report serve", "rerun", "rules", "rules check", "rules show", "run", "runs", "status",
    "vram"}


def test_cardproof_help_lists_every_command_it_listed_before():
    runner = CliRunner()
    listed = set()
    for group in [()] + [tuple(p.split()) for p in sorted(COMMANDS_BEFORE)]:
        out = runner.invoke(cli, [*group, "--help"], terminal_width=200)
        assert out.exit_code == 0, (group, out.output)
        if "Commands:" in out.output:
            names = [ln.split()[0] for ln in out.output.split("Commands:", 1)[1].splitlines() if ln.strip()]
            listed |= {" ".join((*group, n)) for n in names}
    assert listed == COMMANDS_BEFORE


def test_a_command_is_imported_from_its_module_and_invoked_on_its_own(tmp_path):
    """No ``cardproof`` group needed: the command object is the module's, as a test or a reader finds it."""
    from cardproof.commands.daemon import queue_group, status_cmd
    from cardproof.commands.gates import gates_cmd
    from cardproof.daemon.store import open_store

    runner = CliRunner()
    db = tmp_path / "never.db"
    res = runner.invoke(status_cmd, ["--db", str(db)])
    assert res.exit_code == 0 and res.output.startswith("daemon: no daemon has run"), res.output
    assert not db.exists()
    open_store(db).close()
    res = runner.invoke(queue_group, ["list", "--db", str(db)])
    assert res.exit_code == 0 and res.output == "", res.output
    res = runner.invoke(gates_cmd, ["--db", str(db)])
    assert res.exit_code == 1 and res.output.endswith("never.db: no run in the database\n"), res.output


# Each module imported first in a fresh interpreter, and in random orders: tests/test_import_order.py
