"""``cardproof models make-tiny`` and ``cardproof demo``: tiny local models, and the whole path on them."""

from __future__ import annotations

from pathlib import Path

import click

from .common import fail, progress, project_option


def register(cli: click.Group) -> None:
    @cli.group()
    def models() -> None:
        """Model files."""

    @models.command("make-tiny")
    @click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
    def models_make_tiny(directory: Path) -> None:
        """Write tiny random-weight GGUF models (two sizes and a draft) into DIRECTORY."""
        try:
            from cardproof.daemon.tinymodels import make_tiny
        except ImportError as exc:  # pragma: no cover
            fail(f"{exc}; install the server extra: pip install -e '.[server]'")
        try:
            make_tiny(directory, progress=progress)
        except ImportError as exc:
            fail(f"the gguf package is needed ({exc}); install the server extra: pip install -e '.[server]'")

    @cli.command()
    @click.option(
        "--workdir",
        type=click.Path(file_okay=False, path_type=Path),
        default=Path("data/demo"),
        show_default=True,
        help="Where models, logs and the demo database go.",
    )
    @project_option
    def demo(workdir: Path, project: Path) -> None:
        """Tiny models, a real llama-server in router mode, a campaign, the site."""
        from cardproof.demo import DemoError, run_demo

        try:
            result = run_demo(workdir, project, echo=progress)
        except DemoError as exc:
            fail(str(exc))
        click.echo(f"database: {result['db']}")
        click.echo(f"site: {result['site']}")
