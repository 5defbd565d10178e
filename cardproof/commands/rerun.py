"""``cardproof rerun RUN``: the campaign frozen with a run, run again as it was registered."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cardproof.commands.common import db_option, fail, open_db, progress


@click.command("rerun")
@click.argument("run_id", metavar="RUN", type=int)
@db_option
@click.option("--print", "print_only", is_flag=True,
              help="Print the frozen campaign text (byte for byte, so its SHA-256 is the run's) and the "
                   "command that runs it, instead of running it.")
def rerun_cmd(run_id: int, db: Path | None, print_only: bool) -> None:
    """Run RUN's campaign again, from the text frozen with it (same SHA-256), against its server.

    The server must answer at the campaign's URL first; where it does not, nothing is stored and the
    error says so (start it as the run article's Setup section shows). Exit codes: those of
    ``cardproof run``; 1 also for no such run, a frozen text that fails its hash, or no server.
    """
    from cardproof.daemon.campaign.model import CampaignError
    from cardproof.daemon.campaign.registration import check_before_run, link_run
    from cardproof.daemon.campaign.rerun import RerunError, campaign_of, check_server, frozen_campaign
    from cardproof.daemon.run.runner import run_campaign
    from cardproof.daemon.store import StoreError
    from cardproof.paths import resolve_db

    store = open_db(db, create=False, readonly=print_only)
    try:
        if print_only:
            frozen = frozen_campaign(store.db, run_id)
            click.echo(frozen["text"], nl=False)
            progress(f"# SHA-256 {frozen['sha256']}; save it as {Path(frozen['path']).name} and run: "
                     f"cardproof run {Path(frozen['path']).name} --db {resolve_db(db)}")
            return
        camp = campaign_of(store.db, run_id)
        check_server(camp)
        progress(check_before_run(store.db, camp))
        outcome = run_campaign(store, camp, echo=progress)
        link_run(store, outcome.run_id, camp)
    except RerunError as exc:
        fail(str(exc))
    except CampaignError as exc:
        fail(str(exc), 2)
    except StoreError as exc:
        fail(str(exc))
    finally:
        store.close()
    click.echo(f"run {outcome.run_id}: rerun of run {run_id}, {outcome.status}, "
               f"{outcome.measured}/{outcome.planned} samples, db {resolve_db(db)}")
    sys.exit(outcome.exit_code)


#: the commands this module adds to ``cardproof`` (cardproof/cli.py)
COMMANDS = (rerun_cmd,)
