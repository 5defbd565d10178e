"""``cardproof report serve``: the built site on a local server (127.0.0.1 only).

``commands/report.py`` adds ``report_serve`` to its ``report`` group.
"""

from __future__ import annotations

from pathlib import Path

import click

from .common import fail


@click.command("serve")
@click.option("--project", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="Folder whose build/site/ is served.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="Port on 127.0.0.1 (0: any free port).")
@click.option("--prefix", default="/", show_default=True,
              help="Serve under this URL path (e.g. /results/) to try a sub-path before publishing.")
def report_serve(project: Path, port: int, prefix: str) -> None:
    """Serve the built site on 127.0.0.1 until Ctrl-C."""
    from cardproof.report.serve import SiteMissing, make_server, normalise_prefix, site_dir_of

    try:
        site = site_dir_of(project)
        prefix = normalise_prefix(prefix)
        server = make_server(site, port, prefix)
    except SiteMissing as exc:
        fail(str(exc))
    except ValueError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}")
    click.echo(f"serving {site} at http://127.0.0.1:{server.server_address[1]}{prefix} (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
