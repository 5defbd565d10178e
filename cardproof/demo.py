"""``cardproof demo``: the whole path on tiny local models and a real server."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from cardproof.daemon import gate_counts
from cardproof.daemon import llamacpp
from cardproof.daemon.campaign import parse_campaign
from cardproof.daemon.runner import run_campaign
from cardproof.daemon.judge import judge_run
from cardproof.daemon.logs import LogSourceError, attribute_run, capture_file
from cardproof.daemon.memory.capture import MemoryCapture
from cardproof.daemon.store import StoreError, open_store

DEMO_CAMPAIGN = """\
# Built-in demo campaign: tiny random-weight models on a local llama-server.
[campaign]
name = "demo"
prompt_classes = ["short", "medium", "long"]
reasoning = [false, true]
repetitions = 3
repetitions_reasoning = 2
max_tokens = 32
canaries = true

# Tiny random-weight models rarely stop on their own, and this machine may
# have no GPU: both gates are counted and reported, but do not empty the table.
[gates.length_limit]
exclude = false
[gates.not_on_card]
exclude = false

# Random weights fail every probe: the verdicts must say so honestly.
[probes]
run = ["tools", "thinking", "reasoning", "coding"]
repeat = 2
max_tokens = 64

# A small concurrency sweep and a context-depth sweep, kept within the tiny models'
# context: the article's Load and Context sections. The router serves one slot per
# model, so the 2- and 4-stream steps show queueing.
[load]
streams = [1, 2, 4]
requests_per_stream = 2
prompt_class = "short"
max_tokens = 16

[depth]
tokens = [0, 256, 1024]
repetitions = 2
max_tokens = 16

[rules]
candidate = 'probe.reasoning == "PASS" and decode.short >= 100'

[server]
backend = "llama-server"
url = "{url}"
request_timeout_s = 120
log_file = "{log_file}"

{embedding}
[[models]]
name = "tiny-b"

[[models]]
name = "tiny-a"
pinned = true
"""


class DemoError(Exception):
    pass


def run_demo(workdir: Path, project: Path, *, echo: Callable[[str], None] = print) -> dict:
    from cardproof.report.build import ReportError, build

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        llamacpp.find_binary()
    except llamacpp.LlamaServerMissing as exc:
        raise DemoError(str(exc)) from exc
    try:
        from cardproof.daemon.tinymodels import DRAFT_FOR, make_tiny
    except ImportError as exc:
        raise DemoError(f"the gguf package is needed ({exc}); pip install -e '.[server]'") from exc

    echo("step 1/4: tiny models")
    files = make_tiny(workdir / "models", progress=echo)
    preset = llamacpp.write_preset(
        workdir / "models.ini",
        {n: p for n, p in files.items() if n not in DRAFT_FOR.values()},
        {target: files[draft] for target, draft in DRAFT_FOR.items()},
    )
    log_path = workdir / "logs" / "llama-server.log"
    echo("step 2/4: starting llama-server (router mode)")
    server = llamacpp.LlamaServerProcess(llamacpp.router_args(preset), log_path=log_path)
    try:
        server.start()
    except llamacpp.LlamaServerFailed as exc:
        raise DemoError(str(exc)) from exc
    echo(f"llama-server at {server.url}, log {log_path}")
    # a co-resident embedding model, as in the seeds: probed around every cell
    embed = llamacpp.LlamaServerProcess(
        ["-m", str(files["tiny-a"]), "--embeddings", "--pooling", "mean", "-lv", "4", "--log-colors", "off",
         "--no-webui", "--threads", "1"],
        log_path=workdir / "logs" / "embedding-server.log",
    )
    try:
        embed.start()
    except llamacpp.LlamaServerFailed as exc:
        server.stop()
        raise DemoError(str(exc)) from exc
    echo(f"embedding server at {embed.url}")
    db_path = workdir / "cardproof.db"
    try:
        camp_text = DEMO_CAMPAIGN.format(
            url=server.url, log_file=str(log_path.resolve()), embedding=f'[embedding]\nurl = "{embed.url}"\n'
        )
        camp_path = workdir / "demo-campaign.toml"
        camp_path.write_text(camp_text)
        campaign = parse_campaign(camp_text, str(camp_path))
        echo("step 3/4: campaign")
        store = open_store(db_path)
        try:
            outcome = run_campaign(store, campaign, echo=echo)
        finally:
            store.close()
    except StoreError as exc:
        raise DemoError(str(exc)) from exc
    finally:
        server.stop()
        embed.stop()
    # the server's last lines (exit, memory breakdown) arrive when it stops
    try:
        store = open_store(db_path)
        try:
            capture_file(store, log_path, run_id=outcome.run_id, final=True)
            attribute_run(store, outcome.run_id)
            judge_run(store, outcome.run_id, campaign.gates)
            # judged again with the final log lines: these are the counts the article states
            echo("final " + gate_counts.summary_line(store.db, outcome.run_id))
            MemoryCapture(store, outcome.run_id).selfreports_llama_run()
        finally:
            store.close()
    except (StoreError, LogSourceError) as exc:
        echo(f"warning: final log capture: {exc}")
    echo("step 4/4: report and site")
    try:
        result = build(db_path, Path(project))
    except (StoreError, ReportError) as exc:
        raise DemoError(str(exc)) from exc
    return {"db": db_path, "run_id": outcome.run_id, "site": result["site_dir"] / "index.html"}
