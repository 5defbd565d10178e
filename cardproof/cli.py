"""The ``cardproof`` command: one click group, every command registered here from ``cardproof/commands/``.

Commands stay thin; the work lives in modules. A command module defines its
commands at module level, lists the top-level ones in ``COMMANDS`` and takes
its shared options and helpers from ``commands/common.py``; it never imports
this module, so nothing imports in a circle.
"""

from __future__ import annotations

import click

from cardproof import __version__
from cardproof.commands import (compare, daemon, gates, history, imports, logs, merge, models, probes, publish,
                                registration, report, rerun, run, vram)
# for a command module that still takes these from here (imported lazily, so no circle): use commands.common
from cardproof.commands.common import fail, open_db, open_path, open_run  # noqa: F401


@click.group()
@click.version_option(__version__, prog_name="cardproof")
def cli() -> None:
    """Evidence-first benchmarks of local LLM inference servers."""


#: every command module, registered explicitly (``cardproof --help`` lists the commands by name)
COMMAND_MODULES = (run, rerun, registration, report, publish, models, daemon, logs, gates, probes, compare, history,
                   merge, imports, vram)

for _module in COMMAND_MODULES:
    for _command in _module.COMMANDS:
        cli.add_command(_command)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
