"""``cardproof publish``: build the site and record what it published, so later changes show as Addenda."""

from __future__ import annotations

from pathlib import Path

import click

from cardproof import __version__
from cardproof.paths import resolve_db

from .common import db_option, fail, open_path, project_option


@click.command("publish")
@db_option
@project_option
@click.option("--note", default=None,
              help="Why the statements changed since the last publication (shown in each addendum).")
@click.option("--show-client-addresses", is_flag=True,
              help="Publish client IP addresses from access logs unmasked (masked by default).")
@click.option("--site-url", default=None,
              help="The site's public address (https://host/path/): adds an RSS/JSON feed of the run articles.")
def publish(db: Path | None, project: Path, note: str | None, show_client_addresses: bool,
            site_url: str | None) -> None:
    """Record every statement of every finished run's article, then build the site.

    Headline, table figures, verdicts, the fastest variant, knees and
    service levels, contradictions, gates, caveats and findings: a later
    build that states one otherwise, no longer or anew shows an Addenda
    section in the article: what was published, what replaced it, when,
    and why (this note, or the samples that changed).
    """
    from cardproof.daemon.store import StoreError
    from cardproof.report.addenda import record_publication
    from cardproof.report.contradictions.authored import AuthoredError
    from cardproof.report.build import ReportError, build

    from cardproof.report.feed import FeedError, check_site_url

    if note is not None and not note.strip():
        fail("--note: empty; give the reason for the change, or leave --note out", 2)
    try:
        if site_url is not None:
            check_site_url(site_url)
    except FeedError as exc:
        fail(str(exc), 2)
    path = resolve_db(db)
    store = open_path(path, create=False)
    try:
        pub = record_publication(store.db, note=note, version=__version__, project=project)
        n = store.db.execute("select count(*) from published_figures where publication_id = ?",
                             [pub]).fetchone()[0]
    except AuthoredError as exc:  # the author's contradictions are stated too: nothing is recorded
        fail(f"nothing published: {exc}", 2)
    finally:
        store.close()
    try:
        result = build(path, project, show_addresses=show_client_addresses, site_url=site_url)
    except (StoreError, ReportError) as exc:
        fail(f"publication {pub} recorded, but the site was not built: {exc}")
    click.echo(f"publication {pub}: {n} figures recorded; site built: {result['site_dir'] / 'index.html'}")


#: the commands this module adds to ``cardproof`` (cardproof/cli.py)
COMMANDS = (publish,)
