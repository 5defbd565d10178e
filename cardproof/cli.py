"""The ``cardproof`` command. Commands stay thin; the work lives in modules."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cardproof import __version__
from cardproof.paths import resolve_db

db_option = click.option(
    "--db",
    "db",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="SQLite database (default: $CARDPROOF_DB, else the user data dir).",
)


def fail(message: str, code: int = 1) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def open_db(db: Path | None, *, create: bool = True, readonly: bool = False):
    """The store at ``--db`` (else its default), or a one-line error and exit 1.

    ``readonly``: for commands that only read. The file is never created, and
    is opened read-only (see ``open_store(mode="ro")``).
    """
    return open_path(resolve_db(db), create=create, readonly=readonly)


def open_path(path: Path, *, create: bool = True, readonly: bool = False):
    """The store at ``path``; what was done to it or what it is told on stderr; errors exit 1."""
    from cardproof.daemon.store import StoreError, open_store

    try:
        store = open_store(path, create=create, mode="ro" if readonly else "rw")
    except StoreError as exc:
        fail(str(exc))
    if store.upgraded:
        click.echo(f"note: {store.path}: upgraded from an older cardproof ({', '.join(store.upgraded)})", err=True)
    if store.newer_migrations:
        click.echo(f"warning: {store.path}: written by a newer cardproof ({', '.join(store.newer_migrations)}); "
                   f"read as far as cardproof {__version__} knows it", err=True)
    return store


def open_run(db: Path | None, run_id: int | None):
    """An existing store (read-only) and a run in it (default: the latest), or a one-line error."""
    store = open_db(db, readonly=True)
    if run_id is None:
        run_id = store.db.execute("select max(id) from runs").fetchone()[0]
        if run_id is None:
            fail(f"{store.path}: no run in the database")
    elif store.db["runs"].count_where("id = ?", [run_id]) == 0:
        fail(f"{store.path}: no run {run_id}")
    return store, run_id


def _progress(line: str) -> None:
    click.echo(line, err=True)


@click.group()
@click.version_option(__version__, prog_name="cardproof")
def cli() -> None:
    """Evidence-first benchmarks of local LLM inference servers."""


@cli.command()
@click.argument("campaign", type=click.Path(path_type=Path))
@db_option
@click.option("--via-daemon", is_flag=True,
              help="Queue the campaign for the running daemon instead of running it here.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Daemon config (with --via-daemon; its database is used unless --db is given).")
def run(campaign: Path, db: Path | None, via_daemon: bool, config_path: Path | None) -> None:
    """Run CAMPAIGN (a TOML file) against its server and store every sample.

    Exit codes: 0 all samples measured, 3 completed with exceptions,
    1 failed (server unreachable), 2 invalid campaign, 130 interrupted.
    With --via-daemon: 0 once queued.
    """
    from cardproof.daemon.campaign import CampaignError, load_campaign
    from cardproof.daemon.runner import run_campaign
    from cardproof.daemon.store import StoreError, open_store

    try:
        camp = load_campaign(campaign)
    except CampaignError as exc:
        fail(str(exc), 2)
    if via_daemon:
        from cardproof.commands.daemon import _db
        from cardproof.daemon.service.queue import enqueue

        path = _db(db, config_path)
        try:
            store = open_store(path)
            queue_id = enqueue(store, camp)
        except StoreError as exc:
            fail(str(exc))
        click.echo(f"queued as {queue_id} in {path}; see: cardproof status")
        return
    store = open_db(db)
    try:
        outcome = run_campaign(store, camp, echo=_progress)
    except StoreError as exc:
        fail(str(exc))
    finally:
        store.close()
    click.echo(f"run {outcome.run_id}: {outcome.status}, {outcome.measured}/{outcome.planned} samples, db {resolve_db(db)}")
    sys.exit(outcome.exit_code)


@cli.group()
def report() -> None:
    """Render articles from the database and build the site."""


@report.command("build")
@db_option
@click.option(
    "--project",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Folder with mkdocs.yml and site/ (scaffolded when missing).",
)
@click.option("--no-mkdocs", is_flag=True, help="Write the Markdown only, skip mkdocs build.")
@click.option("--show-client-addresses", is_flag=True,
              help="Publish client IP addresses from access logs unmasked (masked by default).")
def report_build(db: Path | None, project: Path, no_mkdocs: bool, show_client_addresses: bool) -> None:
    """Write run articles (English and German) into site/ and run mkdocs build --strict."""
    from cardproof.daemon.store import StoreError
    from cardproof.report.build import ReportError, build

    try:
        result = build(resolve_db(db), project, run_mkdocs=not no_mkdocs, show_addresses=show_client_addresses)
    except (StoreError, ReportError) as exc:
        fail(str(exc))
    click.echo(f"{len(result['articles'])} articles written under {project / 'site'}")
    if result["site_dir"]:
        click.echo(f"site built: {result['site_dir'] / 'index.html'}")


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
        make_tiny(directory, progress=_progress)
    except ImportError as exc:
        fail(f"the gguf package is needed ({exc}); install the server extra: pip install -e '.[server]'")


@cli.command("runs")
@db_option
def runs_cmd(db: Path | None) -> None:
    """List runs with status and coverage.

    A run stored as running whose process is gone shows as interrupted, with
    the coverage of what it stored; the database is not changed (the next
    ``cardproof run`` or daemon start writes that).
    """
    from cardproof.report.queries import runs as q_runs

    store = open_db(db, readonly=True)
    for r in q_runs(store.db):
        cov = f"{(r['coverage'] or 0):.0%}"
        click.echo(
            f"{r['id']:>4}  {(r['started_at'] or '')[:19]:<19}  {r['status']:<11} {cov:>5} "
            f"({r['samples_measured']}/{r['samples_planned']})  {r['campaign_name']}"
        )
        if r.get("liveness"):
            click.echo(f"      {r['liveness']}")


@cli.command()
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("data/demo"),
    show_default=True,
    help="Where models, logs and the demo database go.",
)
@click.option(
    "--project",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Folder with mkdocs.yml and site/ (scaffolded when missing).",
)
def demo(workdir: Path, project: Path) -> None:
    """Tiny models, a real llama-server in router mode, a campaign, the site."""
    from cardproof.demo import DemoError, run_demo

    try:
        result = run_demo(workdir, project, echo=_progress)
    except DemoError as exc:
        fail(str(exc))
    click.echo(f"database: {result['db']}")
    click.echo(f"site: {result['site']}")


from cardproof.commands import register_all  # noqa: E402  (after the group exists)

register_all(cli)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
