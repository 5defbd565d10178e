"""``cardproof report build``: the articles of every run, in both languages, and the site."""

from __future__ import annotations

from pathlib import Path

import click

from cardproof.paths import resolve_db

from .common import db_option, fail, project_option
from .report_serve import report_serve


@click.group()
def report() -> None:
    """Render articles from the database and build the site."""


@report.command("build")
@db_option
@project_option
@click.option("--no-mkdocs", is_flag=True, help="Write the Markdown only, skip mkdocs build.")
@click.option("--show-client-addresses", is_flag=True,
              help="Publish client IP addresses from access logs unmasked (masked by default).")
@click.option("--site-url", default=None,
              help="The site's public address (https://host/path/): adds an RSS/JSON feed of the run articles.")
def report_build(db: Path | None, project: Path, no_mkdocs: bool, show_client_addresses: bool,
                 site_url: str | None) -> None:
    """Write run articles (English and German) into site/ and run mkdocs build --strict."""
    from cardproof.daemon.store import StoreError
    from cardproof.report.build import ReportError, build
    from cardproof.report.feed import FeedError, check_site_url

    try:
        if site_url is not None:
            check_site_url(site_url)
        result = build(resolve_db(db), project, run_mkdocs=not no_mkdocs, show_addresses=show_client_addresses,
                       site_url=site_url)
    except FeedError as exc:
        fail(str(exc), 2)
    except (StoreError, ReportError) as exc:
        fail(str(exc))
    click.echo(f"{len(result['articles'])} articles written under {project / 'site'}")
    if result["site_dir"]:
        from cardproof.report.serve import config_warnings, how_to_view

        for line in config_warnings(project):  # an older project's mkdocs.yml
            click.echo(f"note: {line} (see cardproof's report/scaffold/mkdocs.yml)", err=True)

        click.echo(f"site built: {result['site_dir'] / 'index.html'}")
        for line in how_to_view(result["site_dir"]):
            click.echo(f"  {line}")


report.add_command(report_serve)  # report serve: the built site on 127.0.0.1


#: the commands this module adds to ``cardproof`` (cardproof/cli.py)
COMMANDS = (report,)
