"""The store's schema: every change as a migration, in the order a new database applies them.

The order here is the order sqlite-utils applies them to a new file, and it
must never change: ``tests/test_migrations.py`` pins it and the schema it
ends in. The names are part of the file format -- every existing database
records them in ``_sqlite_migrations`` -- so none is ever renamed, even
where its number no longer matches its place (m005 runs before m004, m011
before m010 and m009: they were written in parallel and merged in this
order). A new migration goes at the end, with the next free number.
"""

from __future__ import annotations

from typing import Callable

import sqlite_utils
from sqlite_utils import Migrations

migrations = Migrations("cardproof")

#: frozen campaign text -> its normalised JSON, None where it does not parse. The campaign package
#: (above the store) sets it when imported; m031 back-fills old runs with it.
_campaign_normaliser: Callable[[str], str | None] | None = None


def set_campaign_normaliser(normalise: Callable[[str], str | None]) -> None:
    """Name the parser m031 reads runs frozen before ``campaigns.campaign_json`` with."""
    global _campaign_normaliser
    _campaign_normaliser = normalise


@migrations(name="m001_foundation")
def m001_foundation(db: sqlite_utils.Database) -> None:
    _m001_campaigns(db)
    _m001_runs(db)
    _m001_models(db)
    _m001_loads(db)
    _m001_cells(db)
    _m001_samples(db)


def _m001_campaigns(db: sqlite_utils.Database) -> None:
    db["campaigns"].create(
        {
            "id": int, "name": str, "path": str, "sha256": str, "toml_text": str, "registered_at": str,
        },
        pk="id",
    )
    db["campaigns"].create_index(["sha256"])


def _m001_runs(db: sqlite_utils.Database) -> None:
    db["runs"].create(
        {
            "id": int, "campaign_id": int, "host": str, "gpus_json": str, "backend": str, "server_url": str,
            "server_version": str, "server_build": str, "server_props_json": str, "started_at": str,
            "ended_at": str, "status": str, "exit_code": int, "samples_planned": int, "samples_measured": int,
            "samples_failed": int, "coverage": float, "error_text": str,
        },
        pk="id",
        foreign_keys=[("campaign_id", "campaigns", "id")],
    )


def _m001_models(db: sqlite_utils.Database) -> None:
    db["models"].create(
        {
            "id": int, "name": str, "path": str, "file_bytes": int, "digest": str, "digest_kind": str,
            "quantisation": str, "architecture": str, "capabilities_json": str,
        },
        pk="id",
    )
    db["models"].create_index(["name", "digest"], unique=True)


def _m001_loads(db: sqlite_utils.Database) -> None:
    db["loads"].create(
        {
            "id": int, "run_id": int, "model_id": int,
            "trigger": str,  # explicit | inside_request
            "sample_id": int, "pid": int, "port": int, "requested_at": str, "ready_at": str,
            "load_seconds": float, "ended_at": str, "end_reason": str, "status": str, "error_text": str,
        },
        pk="id",
        foreign_keys=[("run_id", "runs", "id"), ("model_id", "models", "id")],
    )


def _m001_cells(db: sqlite_utils.Database) -> None:
    db["cells"].create(
        {
            "id": int, "run_id": int, "model_id": int, "position": int, "prompt_class": str, "reasoning": int,
            "max_tokens": int, "repetitions": int, "pinned": int,
        },
        pk="id",
        foreign_keys=[("run_id", "runs", "id"), ("model_id", "models", "id")],
    )


def _m001_samples(db: sqlite_utils.Database) -> None:
    db["samples"].create(
        {
            "id": int, "run_id": int, "cell_id": int, "repetition": int, "nonce": str, "started_at": str,
            "prompt_tokens": int, "generated_tokens": int, "prompt_ms": float, "predicted_ms": float,
            "prefill_tps": float, "decode_tps": float, "ttft_ms": float, "wall_ms": float, "stop_reason": str,
            "answer_chars": int, "reasoning_chars": int, "draft_tokens": int, "draft_accepted": int,
            "cached_tokens": int, "counter_source": str, "error_kind": str, "error_text": str,
            "request_json": str, "response_json": str,
        },
        pk="id",
        foreign_keys=[("run_id", "runs", "id"), ("cell_id", "cells", "id")],
    )
    db["samples"].create_index(["cell_id", "repetition"])


@migrations(name="m002_evidence_gates_memory")
def m002_evidence_gates_memory(db: sqlite_utils.Database) -> None:
    _m002_sample_kind(db)
    _m002_gates(db)
    _m002_log_evidence(db)
    _m002_card_memory(db)
    _m002_foreign_load(db)



def _m002_sample_kind(db: sqlite_utils.Database) -> None:
    # samples: canary provocations are stored beside measurements, never mixed in
    db["samples"].add_column("kind", str)  # measure | canary
    db.execute("update samples set kind = 'measure' where kind is null")
    db["loads"].add_column("model_file", str)


def _m002_gates(db: sqlite_utils.Database) -> None:
    # gates
    db["gate_results"].create(
        {
            "id": int, "sample_id": int, "gate": str,
            "fired": int,  # 1 fired, 0 not fired, NULL the gate itself raised
            "observed": float, "observed_text": str, "threshold": float, "error_text": str,
        },
        pk="id",
        foreign_keys=[("sample_id", "samples", "id")],
    )
    db["gate_results"].create_index(["sample_id", "gate"], unique=True)
    db["canaries"].create(
        {
            "id": int, "run_id": int, "gate": str,
            "result": str,  # fired | not_fired | recorded | not_run
            "reason": str, "sample_id": int, "detail_json": str, "at": str,
        },
        pk="id",
        foreign_keys=[("run_id", "runs", "id")],
    )


def _m002_log_evidence(db: sqlite_utils.Database) -> None:
    # log evidence
    db["log_sources"].create(
        {
            "id": int,
            "kind": str,  # journal | journal-file | plain
            "name": str,  # unit name or file path
            "cursor": str,  # last journal cursor stored
            "offset": int,  # plain files: byte offset of the next unread line
            "inode": int, "updated_at": str,
        },
        pk="id",
    )
    db["log_sources"].create_index(["kind", "name"], unique=True)
    db["log_lines"].create(
        {
            "id": int, "source_id": int, "run_id": int, "ts": str, "unit": str, "pid": int,
            "port": int,  # router child prefix [port]
            "cursor": str, "offset": int,
            "raw": str,  # the line as read, never rewritten
            "raw_bytes": bytes,  # set only when the line was not valid UTF-8
            "load_id": int,
            "attribution": str,  # pid | port | boundary | unattributed
        },
        pk="id",
        foreign_keys=[("source_id", "log_sources", "id")],
    )
    db["log_lines"].create_index(["source_id", "cursor"])
    db["log_lines"].create_index(["load_id"])
    db["facts"].create(
        {
            "id": int, "load_id": int, "line_id": int,
            "name": str,  # as daemon/logs/parsers/ name them: offloaded_layers, kv_buffer_mib, ...
            "device": str,  # CUDA0, CPU_Mapped, ... or NULL
            "value_num": float, "value_text": str, "unit": str,
        },
        pk="id",
        foreign_keys=[("line_id", "log_lines", "id")],
    )
    db["facts"].create_index(["load_id", "name"])
    db["capture_gaps"].create(
        {"id": int, "source_id": int, "at": str, "reason": str, "lines_skipped": int},
        pk="id",
    )


def _m002_card_memory(db: sqlite_utils.Database) -> None:
    # memory from the card
    db["memory_samples"].create(
        {
            "id": int, "run_id": int, "load_id": int, "ts": str,
            "scope": str,  # device | process
            "device_index": int, "pid": int, "process_name": str, "used_mib": float, "total_mib": float,
            "free_mib": float, "util_pct": float,
            "source": str,  # nvml | recorded
            "note": str,
        },
        pk="id",
    )
    db["memory_samples"].create_index(["run_id", "ts"])
    db["memory_selfreports"].create(
        {
            "id": int, "run_id": int, "load_id": int, "ts": str,
            "source": str,  # llama-server breakdown, ollama /api/ps, ...
            "total_mib": float, "gpu_mib": float, "items_json": str,
        },
        pk="id",
    )


def _m002_foreign_load(db: sqlite_utils.Database) -> None:
    # foreign load
    db["requests_seen"].create(
        {
            "id": int, "run_id": int, "ts": str, "client": str, "method": str, "path": str, "status": int,
            "line_id": int, "source": str,
        },
        pk="id",
    )


@migrations(name="m005_gate_checks")
def m005_gate_checks(db: sqlite_utils.Database) -> None:
    # canary cells sit beside measurement cells and never reach a median
    db["cells"].add_column("kind", str)  # measure | canary
    db.execute("update cells set kind = 'measure' where kind is null")
    db["cells"].add_column("canary_gate", str)
    db["samples"].add_column("load_id", int)  # the load that served this sample, as the runner knew it
    # what was observed around each cell: server counters, embedding probes
    db["cell_checks"].create(
        {
            "id": int, "cell_id": int,
            "phase": str,  # before | after
            "check": str,  # metrics | embedding
            "at": str, "ok": int, "value_json": str, "error_text": str,
        },
        pk="id",
        foreign_keys=[("cell_id", "cells", "id")],
    )
    db["cell_checks"].create_index(["cell_id", "check"])


@migrations(name="m004_memory_attribution")
def m004_memory_attribution(db: sqlite_utils.Database) -> None:
    # memory from the card: what a reading saw beyond used/total/free
    for col, kind in (
        ("device_name", str), ("uuid", str), ("util_mem_pct", float),
        ("pcie_gen_current", int), ("pcie_gen_max", int),
        ("pcie_width_current", int), ("pcie_width_max", int),
        ("process_kind", str),  # compute | graphics | compute+graphics
        ("pid_status", str),  # local | local_unverified | foreign | mismatch
        ("reason", str),  # why a value is missing or a PID is not ours
    ):
        db["memory_samples"].add_column(col, kind)
    db["memory_samples"].create_index(["pid", "ts"])
    db["memory_selfreports"].add_column("kind", str)  # exit | projection | ps | facts
    db["memory_selfreports"].add_column("line_ids_json", str)
    # which processes on the card are a load's: resolved by port or PID, never by name
    db["memory_load_pids"].create(
        {"id": int, "load_id": int, "pid": int, "how": str, "process_name": str, "resolved_at": str},
        pk="id",
    )
    db["memory_load_pids"].create_index(["load_id"])
    # steady state after a load and peak/median per cell, with the window they cover
    db["memory_load_stats"].create(
        {
            "id": int, "run_id": int, "load_id": int, "cell_id": int,
            "kind": str,  # after_load | cell
            "ts_from": str, "ts_to": str,
            "status": str,  # steady | not_steady | no_process | pid_namespace_mismatch | not_measured | ...
            "total_mib": float, "peak_mib": float, "median_mib": float, "n_ticks": int, "per_device_json": str,
            "neighbours_json": str, "note": str,
        },
        pk="id",
    )
    db["memory_load_stats"].create_index(["load_id", "kind"])
    # free memory read from the card right before a load (pinned-model rule)
    db["memory_free_checks"].create(
        {
            "id": int, "run_id": int, "model_id": int, "ts": str, "device_index": int, "total_mib": float,
            "free_mib": float, "required_mib": float, "source": str, "note": str,
        },
        pk="id",
    )
    db["memory_free_checks"].create_index(["run_id", "model_id", "ts"])


@migrations(name="m003_logs_attribution")
def m003_logs_attribution(db: sqlite_utils.Database) -> None:
    # log evidence: where an import resumes, and loads seen in a log
    db["log_sources"].add_column("state_json", str)  # attribution bindings to resume with
    for col, kind in (
        ("origin", str),  # NULL: written by the runner; 'log': discovered in a server log
        ("model_name", str),  # as the server names it (router name=, Ollama model file)
        ("model_file", str),
        ("source_id", int),
        ("start_line_id", int),
        ("ready_line_id", int),
        ("end_line_id", int),
        ("exit_status", int),
        ("merged_into", int),  # a log load linked to the runner's row of the same load
    ):
        if col not in db["loads"].columns_dict:
            db["loads"].add_column(col, kind)
    db["log_lines"].create_index(["run_id"], if_not_exists=True)
    db["facts"].create_index(["line_id"], if_not_exists=True)
    # Journal cursors are ~130 random-looking bytes: indexing them cost 1.5 of
    # 3.9 CPU seconds per 200,000 imported lines. Resuming reads the cursor
    # from log_sources; only the rare re-read after a lost cursor scans them.
    db.execute("drop index if exists idx_log_lines_source_id_cursor")


@migrations(name="m006_daemon_service")
def m006_daemon_service(db: sqlite_utils.Database) -> None:
    # the daemon: its queue, its own state and heartbeat, quiet-window waits
    db["daemon_queue"].create(
        {
            "id": int, "campaign_path": str, "campaign_name": str, "campaign_sha256": str,
            "campaign_text": str,  # frozen at enqueue time: the file may change later
            "enqueued_at": str,
            "enqueued_by": str,  # user@host pid N
            "status": str,  # queued | running | done | failed | gave_up | cancelled
            "attempts": int, "last_run_id": int, "started_at": str, "finished_at": str, "reason": str,
            "require_quiet": int,  # NULL: the daemon config decides
        },
        pk="id",
    )
    db["daemon_queue"].create_index(["status", "id"])
    db["daemon_queue_runs"].create(
        {"id": int, "queue_id": int, "run_id": int, "attempt": int, "daemon_id": int, "started_at": str},
        pk="id",
        foreign_keys=[("queue_id", "daemon_queue", "id"), ("run_id", "runs", "id")],
    )
    db["daemon_queue_runs"].create_index(["run_id"], unique=True)
    # one row per daemon start; the newest row is the daemon's current state
    db["daemon_state"].create(
        {
            "id": int, "pid": int, "host": str, "config_path": str, "started_at": str, "ready_at": str,
            "heartbeat_at": str, "heartbeat_s": float, "stopped_at": str,
            "state": str,  # starting | idle | waiting_quiet | running | stopping | stopped
            "exit_reason": str, "queue_id": int, "run_id": int, "progress_json": str, "status_text": str,
            "collectors_json": str,
            "recovered_json": str,  # runs found 'running' at start and what was done with them
        },
        pk="id",
    )
    db["quiet_waits"].create(
        {
            "id": int, "queue_id": int, "run_id": int, "daemon_id": int, "started_at": str, "ended_at": str,
            "outcome": str,  # waiting | quiet | gave_up | stopped
            "waited_s": float, "quiet_s": float, "give_up_s": float, "foreign_tokens": int,
            "foreign_requests": int, "foreign_loads": int,
            "clients_json": str,  # foreign requests per client address
            "blocked_seen_json": str,  # addresses that were to be blocked and were seen
            "gpu_pids_json": str, "per_minute_json": str, "sources_json": str, "reason": str,
        },
        pk="id",
    )


@migrations(name="m008_backends_imports")
def m008_backends_imports(db: sqlite_utils.Database) -> None:
    # llama-bench results: one row per test with its whole configuration;
    # the raw row is kept as JSON so fields of newer llama-bench builds are not lost
    db["llama_bench_imports"].create(
        {"id": int, "path": str, "sha256": str, "format": str, "imported_at": str, "host": str, "rows": int},
        pk="id",
    )
    db["llama_bench_imports"].create_index(["sha256"], unique=True)
    db["llama_bench_results"].create(
        {
            "id": int, "import_id": int, "row_index": int, "test": str,
            "build_commit": str, "build_number": int, "cpu_info": str, "gpu_info": str, "backends": str,
            "model_filename": str, "model_type": str, "model_size": int, "model_n_params": int,
            "n_batch": int, "n_ubatch": int, "n_threads": int, "cpu_mask": str, "cpu_strict": int,
            "poll": int, "type_k": str, "type_v": str, "n_gpu_layers": int, "n_cpu_moe": int,
            "split_mode": str, "main_gpu": int, "no_kv_offload": int, "flash_attn": str,
            "devices": str, "tensor_split": str, "tensor_buft_overrides": str, "use_mmap": int,
            "embeddings": int, "n_prompt": int, "n_gen": int, "n_depth": int, "test_time": str,
            "avg_ns": int, "stddev_ns": int, "avg_ts": float, "stddev_ts": float,
            "samples_ns_json": str, "samples_ts_json": str, "row_json": str,
        },
        pk="id",
        foreign_keys=[("import_id", "llama_bench_imports", "id")],
    )
    db["llama_bench_results"].create_index(["import_id", "row_index"], unique=True)
    # several hosts: where a merged run came from; each merge and what it did
    for col in ("merged_from", "merged_at"):
        if col not in db["runs"].columns_dict:
            db["runs"].add_column(col, str)
    db["merges"].create(
        {"id": int, "source_path": str, "at": str, "runs_merged": int, "runs_present": int,
         "conflicts": int, "report_json": str},
        pk="id",
    )
    db["requests_seen"].create_index(["run_id", "ts"], if_not_exists=True)


@migrations(name="m007_probes_rules")
def m007_probes_rules(db: sqlite_utils.Database) -> None:
    # Probe verdicts with their evidence, declared capabilities, pass-rule outcomes
    db["probe_results"].create(
        {
            "id": int, "run_id": int, "model_id": int,
            "probe": str,  # tools | thinking | reasoning | coding | vision
            "variant": str,  # the task (reasoning: task/known or task/changed)
            "attempt": int,  # 1.. : repeats on identical input find unstable probes
            "verdict": str,  # one of daemon/probes/base.py VERDICTS, after declared-vs-delivered
            "raw_verdict": str,  # before the declaration was applied
            "arm": str,  # the branch of the probe's logic that decided
            "declared": int,  # 1 declared, 0 not declared, NULL unknown / not a capability
            "graded": int,  # 0: a detector shown beside the scored tasks
            "duration_ms": float,
            "request_sha256": str,  # of the first request: identical input <=> equal hashes
            "exchange_json": str,  # requests and responses as sent and received
            "detail_json": str, "at": str,
        },
        pk="id",
        foreign_keys=[("run_id", "runs", "id"), ("model_id", "models", "id")],
    )
    db["probe_results"].create_index(["run_id", "model_id", "probe"])
    db["capabilities"].create(
        {"id": int, "run_id": int, "model_id": int, "source": str, "json": str, "at": str},
        pk="id",
        foreign_keys=[("run_id", "runs", "id"), ("model_id", "models", "id")],
    )
    db["rule_results"].create(
        {
            "id": int, "run_id": int, "model_id": int, "rule_name": str, "rule_text": str, "rule_sha256": str,
            "campaign_sha256": str,
            "registered_at": str,  # the campaign's freeze time: before runs.started_at
            "evaluated_at": str,
            "outcome": str,  # pass | fail | undecided | error
            "arms_json": str,  # per arm (top-level 'and' part): text, outcome, values read
            "error_text": str,
        },
        pk="id",
        foreign_keys=[("run_id", "runs", "id"), ("model_id", "models", "id")],
    )
    db["rule_results"].create_index(["run_id"])


@migrations(name="m011_observed_requests")
def m011_observed_requests(db: sqlite_utils.Database) -> None:
    # The server's own per-request counters read from its log (print_timing),
    # observed in production traffic and kept apart from cardproof's measured samples;
    # the load is that of line_id (joined at read time, so rebinding and merging carry it)
    db["observed_requests"].create(
        {
            "id": int, "source_id": int, "run_id": int,
            "line_id": int,  # the line with the generation counters
            "first_line_id": int,  # the prompt counters' line (or line_id)
            "task": int, "slot": int, "prompt_tokens": int, "prompt_ms": float, "generated_tokens": int,
            "decode_ms": float, "draft_accepted": int, "draft_generated": int, "ts": str,
        },
        pk="id",
        foreign_keys=[("line_id", "log_lines", "id"), ("source_id", "log_sources", "id")],
        if_not_exists=True,
    )
    db["observed_requests"].create_index(["line_id"], if_not_exists=True)


@migrations(name="m010_timestamp_notes")
def m010_timestamp_notes(db: sqlite_utils.Database) -> None:
    # An access line whose printed time is no date (2025/13/45 - 99:99:99) keeps that
    # text in ts, and ts_note says why; it never stops an import or a report build
    if "ts_note" not in db["requests_seen"].columns_dict:
        db["requests_seen"].add_column("ts_note", str)


@migrations(name="m009_run_liveness")
def m009_run_liveness(db: sqlite_utils.Database) -> None:
    # Which process a 'running' run belongs to, so any reader can tell a
    # run whose process is gone (SIGKILL, OOM, power loss) from one still measuring;
    # the start time (clock ticks since boot) and boot id tell a reused pid apart
    for col, kind in (("pid", int), ("pid_start_ticks", int), ("boot_id", str), ("pid_ns", str)):
        if col not in db["runs"].columns_dict:
            db["runs"].add_column(col, kind)


@migrations(name="m012_registrations")
def m012_registrations(db: sqlite_utils.Database) -> None:
    # `cardproof register` freezes a campaign's text, hash and time before any run, and
    # a run of that text is linked to its registration, so "registered before the run" is a fact
    db["registrations"].create(
        {"id": int, "name": str, "path": str, "sha256": str, "toml_text": str, "registered_at": str},
        pk="id", if_not_exists=True,
    )
    db["registrations"].create_index(["sha256"], if_not_exists=True)
    if "registration_id" not in db["runs"].columns_dict:
        db["runs"].add_column("registration_id", int)


@migrations(name="m014_said_observations")
def m014_said_observations(db: sqlite_utils.Database) -> None:
    # What a gate observed and why a canary settled as it did, as a message id and its
    # values (JSON) beside the English text, so each page says it in its own language with its
    # own number format; rows from before keep their English text only, shown quoted
    if "observed_json" not in db["gate_results"].columns_dict:
        db["gate_results"].add_column("observed_json", str)
    if "reason_json" not in db["canaries"].columns_dict:
        db["canaries"].add_column("reason_json", str)


@migrations(name="m015_load_steps")
def m015_load_steps(db: sqlite_utils.Database) -> None:
    # A concurrency or context-depth step of a run, and per request of it what a
    # sample row has no room for (its stream, queue time, the arrival time of every chunk);
    # the step's percentiles are computed from these rows when read, never stored
    db["load_steps"].create(
        {
            "id": int, "run_id": int, "model_id": int, "cell_id": int, "axis": str, "position": int,
            "streams": int, "depth_tokens": int, "requests": int, "prompt_class": str, "max_tokens": int,
            "total_slots": int, "n_ctx": int, "queueing": int, "started_at": str, "ended_at": str,
            "wall_s": float, "refused_reason": str,
        },
        pk="id",
        foreign_keys=[("run_id", "runs", "id"), ("model_id", "models", "id"), ("cell_id", "cells", "id")],
        if_not_exists=True,
    )
    db["load_steps"].create_index(["run_id"], if_not_exists=True)
    db["load_samples"].create(
        {"sample_id": int, "step_id": int, "stream": int, "queue_ms": float, "chunks": int, "itl_ms_json": str},
        pk="sample_id",
        foreign_keys=[("sample_id", "samples", "id"), ("step_id", "load_steps", "id")],
        if_not_exists=True,
    )
    db["load_samples"].create_index(["step_id"], if_not_exists=True)


@migrations(name="m016_publications")
def m016_publications(db: sqlite_utils.Database) -> None:
    # What `cardproof publish` put out -- each run's headline, table figures,
    # verdicts and caveats as shown in each language, with the time and the author's note -- so a
    # later build can show what changed since as Addenda instead of silently rewriting it
    db["publications"].create(
        {"id": int, "published_at": str, "note": str, "cardproof_version": str}, pk="id", if_not_exists=True)
    db["published_figures"].create(
        {
            "id": int, "publication_id": int, "run_id": int,
            "key": str,  # what the figure is: decode:<model>|<class>|<reasoning>, verdict:<rule>|<model>, ...
            "value": str,  # canonical value compared between publications (rounded as shown)
            "shown_json": str,  # label and value as each language showed them; sample ids behind a median
        },
        pk="id",
        foreign_keys=[("publication_id", "publications", "id"), ("run_id", "runs", "id")],
        if_not_exists=True,
    )
    db["published_figures"].create_index(["run_id", "publication_id"], if_not_exists=True)


@migrations(name="m017_run_indexes")
def m017_run_indexes(db: sqlite_utils.Database) -> None:
    # The report reads one run's rows at a time (`where run_id = ?`); without these
    # indexes each such query scans every run's rows, and a year of nightly runs made the
    # report step quadratic in the number of runs
    for table in ("samples", "cells", "loads", "canaries", "observed_requests"):
        if table in db.table_names() and "run_id" in db[table].columns_dict:
            db[table].create_index(["run_id"], if_not_exists=True)
    # a load's samples (observed requests matched to cardproof's own) are read by load
    if "load_id" in db["samples"].columns_dict:
        db["samples"].create_index(["load_id"], if_not_exists=True)


@migrations(name="m018_said_reasons")
def m018_said_reasons(db: sqlite_utils.Database) -> None:
    # Why a depth step was refused and why a log's capture has a gap, as a message id
    # and its values beside the English (as m014 for gate observations), so German pages say
    # them in German with German numbers; older rows keep their English, shown quoted
    if "refused_json" not in db["load_steps"].columns_dict:
        db["load_steps"].add_column("refused_json", str)
    if "reason_json" not in db["capture_gaps"].columns_dict:
        db["capture_gaps"].add_column("reason_json", str)


@migrations(name="m020_fit_checks")
def m020_fit_checks(db: sqlite_utils.Database) -> None:
    # One row per model x context of the fit test -- the load cardproof started at
    # that context, what its log said (layers, KV and buffers per device), the card's memory and the
    # one request; the verdict is stored with its reasons, the log lines behind each figure in evidence_json
    db["fit_checks"].create(
        {
            "id": int, "run_id": int, "model_id": int, "load_id": int, "position": int,
            "context_tokens": int,  # asked for (-c N)
            "ctx_size": int,  # what the server's log says it built
            "n_ctx_train": int, "n_ctx_train_source": str,
            "verdict": str,  # fits | does_not_fit | not_on_card | refused
            "reasons_text": str, "reasons_json": str,  # why (English; message ids and values)
            "offloaded_layers": int, "total_layers": int,
            "kv_card_mib": float, "kv_host_mib": float,
            "buffers_json": str,  # {device: {model, kv, compute, output, ...} MiB} as the log printed them
            "resident_mib": float,  # card memory of the server's process, read from the card
            "card_total_mib": float, "free_mib": float, "memory_source": str, "memory_note": str,
            "request_ok": int, "request_error": str, "prompt_tokens": int, "completion_tokens": int,
            "request_ms": float,
            "server_args_json": str, "log_path": str,
            "evidence_json": str,  # {figure: [log_lines.id, ...]}
            "started_at": str, "ended_at": str,
        },
        pk="id",
        foreign_keys=[("run_id", "runs", "id"), ("model_id", "models", "id"), ("load_id", "loads", "id")],
        if_not_exists=True,
    )
    db["fit_checks"].create_index(["run_id"], if_not_exists=True)


@migrations(name="m021_load_rates")
def m021_load_rates(db: sqlite_utils.Database) -> None:
    # Open-loop Poisson rate steps ([load] rates). A step states its offered rate and
    # the seed its arrivals were drawn from; each request when it was due, when it was sent and
    # how many requests were in flight then (itself included), so arrivals can be checked later
    for name, kind in (("rate_rps", float), ("seed", int), ("duration_s", float)):
        if name not in db["load_steps"].columns_dict:
            db["load_steps"].add_column(name, kind)
    for name, kind in (("scheduled_s", float), ("sent_s", float), ("in_flight", int)):
        if name not in db["load_samples"].columns_dict:
            db["load_samples"].add_column(name, kind)


#: rows per bucket of ``row_changes`` (rowid >> ROW_CHANGE_BITS)
ROW_CHANGE_BITS = 12


@migrations(name="m022_row_changes")
def m022_row_changes(db: sqlite_utils.Database) -> None:
    # Which stored rows were changed or deleted, by table and bucket of 4,096 rowids, counted
    # by triggers (inserted rows are not counted: they are the rows above a table's highest id). The
    # public copy of the store (report/exports.py) then compares only the new rows and the buckets
    # whose counts moved, not a year of log lines on every build; a writer of any kind (the daemon, an
    # import, a merge, a person with the sqlite3 shell) is counted, since triggers fire for all of them
    db.execute("create table if not exists row_changes (tbl text not null, bucket integer not null, "
               "n integer not null, primary key (tbl, bucket))")  # a rowid table: the report reads every table by rowid
    for table in db.table_names():
        if table in ("row_changes", "_sqlite_migrations") or table.startswith("sqlite_"):
            continue
        q = '"' + table.replace('"', '""') + '"'
        literal = "'" + table.replace("'", "''") + "'"

        def mark(row: str) -> str:
            return (f"insert into row_changes (tbl, bucket, n) values ({literal}, {row}.rowid >> {ROW_CHANGE_BITS}, 1) "
                    "on conflict (tbl, bucket) do update set n = n + 1;")

        name = table.replace('"', "").replace("'", "")
        db.execute(f'create trigger if not exists "row_changes_{name}_update" after update on {q} '
                   f"begin {mark('old')} {mark('new')} end")
        db.execute(f'create trigger if not exists "row_changes_{name}_delete" after delete on {q} '
                   f"begin {mark('old')} end")


def counted_tables(conn, schema: str = "main") -> set[str]:
    """Tables of ``schema`` whose updated and deleted rows m022's triggers count in ``row_changes``
    (a store from before m022, or one whose triggers were dropped, has none). ``conn``: a sqlite3
    connection (or anything with its ``execute``)."""
    names = {r[0] for r in conn.execute(f"select name from {schema}.sqlite_master where type in ('table', 'trigger')")}
    if "row_changes" not in names:
        return set()
    # from m025 a table is followed by three triggers (``follow_rows``); a store migrated before it has two
    return {n[len("row_changes_"):-len("_update")] for n in names
            if n.startswith("row_changes_") and n.endswith("_update") and n[:-len("_update")] + "_delete" in names}


def salted_tables(conn, schema: str = "main") -> set[str]:
    """Tables of ``schema`` whose every write is recorded with a fresh salt (``follow_rows``, m025): updates,
    deletes and rows replaced by an insert. A table missing any of its three triggers is not."""
    names = {r[0] for r in conn.execute(f"select name from {schema}.sqlite_master where type in ('table', 'trigger')")}
    cols = {r[1] for r in conn.execute(f"pragma {schema}.table_info(row_changes)")} if "row_changes" in names else set()
    if "salt" not in cols:
        return set()
    return {t for t in counted_tables(conn, schema) if f"row_changes_{t}_replace" in names}


@migrations(name="m023_model_shape")
def m023_model_shape(db: sqlite_utils.Database) -> None:
    # the report's findings group models by their shape as the GGUF header states it: parameters
    # (all, and those one token passes through), experts (count, used per token), the base name and a
    # hash of the tokenizer, so a quantisation ladder of one base model is told from one of several
    # (daemon/server/modelfile.py: gguf_header); rows registered before stay unknown until registered again
    for name, kind in (("params", int), ("active_params", int), ("expert_count", int),
                       ("expert_used_count", int), ("basename", str), ("tokenizer_sha256", str)):
        if name not in db["models"].columns_dict:
            db["models"].add_column(name, kind)


@migrations(name="m024_variants")
def m024_variants(db: sqlite_utils.Database) -> None:
    # Server variants ([variants]). A variant is measured as a model of its own (``base~name``,
    # so cells, samples, gates, medians and the history treat it as one, unchanged); this row ties it to
    # its base model and keeps what it was asked (its arguments, the base's as read, the server's as
    # started) and what its load's log proved of them (per argument: took, contradicted, not shown)
    db["variants"].create(
        {
            "id": int, "run_id": int, "position": int,
            "model_id": int,  # the variant's own models row (base~name)
            "base_model_id": int, "name": str,
            "source": str,  # set | axes
            "args_json": str, "settings_json": str,  # the variant's arguments; an axis variant's values
            "server_kind": str,  # router | single | ollama: how the variant was loaded
            "base_args_json": str, "base_args_source": str,  # the base's arguments as read, and from where
            "server_args_json": str,  # what the variant's server was started with (preset section or command line)
            "load_id": int,
            "status": str,  # took | partly | contradicted | failed | refused | no_log
            "checks_json": str,  # per argument: flag, value, expected, observed, status, line id
            "note": str, "started_at": str, "ended_at": str,
        },
        pk="id",
        foreign_keys=[("run_id", "runs", "id"), ("model_id", "models", "id"), ("base_model_id", "models", "id"),
                      ("load_id", "loads", "id")],
        if_not_exists=True,
    )
    db["variants"].create_index(["run_id"], if_not_exists=True)
    # counted like every table m022 found, so a verdict written after the run renders its article again
    for kind, rows in (("update", "{old} {new}"), ("delete", "{old}")):
        marks = " ".join(
            f"insert into row_changes (tbl, bucket, n) values ('variants', {r}.rowid >> {ROW_CHANGE_BITS}, 1) "
            "on conflict (tbl, bucket) do update set n = n + 1;" for r in rows.format(old="old", new="new").split())
        db.execute(f'create trigger if not exists "row_changes_variants_{kind}" after {kind} on "variants" '
                   f"begin {marks} end")


#: tables no trigger follows: the change record itself, and the migrations' own record
UNFOLLOWED = ("row_changes", "_sqlite_migrations")


def follow_rows(db: sqlite_utils.Database, table: str) -> None:
    """(Re)create the triggers that record every write to ``table`` in ``row_changes``: per bucket of
    4,096 rowids, ``n`` counts rows updated, deleted or replaced, and ``salt`` becomes a fresh
    ``random()`` on each of those writes.

    A migration that adds a table calls this for it (tests/test_migrations.py checks every table has
    the three triggers). The salt is why a count is not enough: a store restored from a backup and
    then edited once reaches the count a different edit of the original reached, and the report kept
    pages made from the other edit. The third trigger sees ``insert or replace`` (and an upsert's
    insert) of a row that exists: without ``recursive_triggers`` (off in the sqlite3 shell and in
    Python) the row it deletes fires no delete trigger. A plain append (an id above the highest) is
    not recorded: it is read as the rows above a table's highest id, and costs an import nothing.
    """
    if table in UNFOLLOWED or table.startswith("sqlite_"):
        return
    q = '"' + table.replace('"', '""') + '"'
    literal = "'" + table.replace("'", "''") + "'"
    name = table.replace('"', "").replace("'", "")

    def mark(row: str) -> str:
        return (f"insert into row_changes (tbl, bucket, n, salt) values ({literal}, {row}.rowid >> {ROW_CHANGE_BITS}, "
                "1, random()) on conflict (tbl, bucket) do update set n = n + 1, salt = random();")

    for kind in ("update", "delete", "replace"):
        db.execute(f'drop trigger if exists "row_changes_{name}_{kind}"')
    db.execute(f'create trigger "row_changes_{name}_update" after update on {q} begin {mark("old")} {mark("new")} end')
    db.execute(f'create trigger "row_changes_{name}_delete" after delete on {q} begin {mark("old")} end')
    # NEW.rowid is -1 in a BEFORE INSERT trigger where the id is left to SQLite: only an insert naming an
    # id at or below the table's highest can replace a row
    db.execute(f'create trigger "row_changes_{name}_replace" before insert on {q} '
               f"when new.rowid >= 0 and new.rowid <= (select max(rowid) from {q}) begin {mark('new')} end")


@migrations(name="m025_row_salts")
def m025_row_salts(db: sqlite_utils.Database) -> None:
    # every write to a stored row changes what the report reads of the store's record (follow_rows): a
    # restore then an edit, and a row replaced by insert or replace, left pages and the public copy stale
    if "salt" not in db["row_changes"].columns_dict:
        db["row_changes"].add_column("salt", int)
    for table in db.table_names():
        follow_rows(db, table)


@migrations(name="m026_statement_kinds")
def m026_statement_kinds(db: sqlite_utils.Database) -> None:
    # a publication records every statement its articles make, kind by kind (report/statements.py);
    # naming the kinds it recorded tells a statement a later build newly makes (a finding that appears,
    # a contradiction opened) from one of a kind an older publication did not record at all
    if "statement_kinds" not in db["publications"].columns_dict:
        db["publications"].add_column("statement_kinds", str)


@migrations(name="m027_run_setup")
def m027_run_setup(db: sqlite_utils.Database) -> None:
    # what a run was set up on, for anyone re-running it (daemon/host/setup.py): the machine, the server
    # process behind the campaign's URL (binary, its SHA-256, command line), the model files' origins,
    # and the load average at the start and the end of the run
    db["run_setup"].create(
        {"id": int, "run_id": int, "captured_at": str, "cpu_model": str, "cpu_flags": str, "cpu_cores": int,
         "cpu_threads": int, "usable_cpus": int, "ram_bytes": int, "server_pid": int, "server_exe": str,
         "server_sha256": str, "server_package": str, "server_cmdline_json": str, "models_json": str,
         "load_start_json": str, "load_end_json": str},
        pk="id", foreign_keys=[("run_id", "runs", "id")], if_not_exists=True)
    db["run_setup"].create_index(["run_id"], if_not_exists=True)
    follow_rows(db, "run_setup")


@migrations(name="m028_run_host")
def m028_run_host(db: sqlite_utils.Database) -> None:
    # a comparison across runs names what differs between them (report/history/conditions.py): the
    # cardproof that measured, and the machine's CPU and load (host_json: CPU model, logical CPUs, the
    # 1-minute load average at the start and end of the run); rows of earlier runs stay unknown, which
    # is no difference
    for name in ("cardproof_version", "host_json"):
        if name not in db["runs"].columns_dict:
            db["runs"].add_column(name, str)


@migrations(name="m029_host_memory_energy")
def m029_host_memory_energy(db: sqlite_utils.Database) -> None:
    # the server process's own memory from the OS (daemon/memory/host.py), on every host: the card's
    # figure exists only where an NVIDIA card does, and CPU and unified-memory hosts had no figure
    db["host_memory_samples"].create(
        {"id": int, "run_id": int, "load_id": int, "pid": int, "ts": str, "rss_mib": float, "uss_mib": float,
         "pss_mib": float, "swap_mib": float, "anon_mib": float, "file_mib": float, "shmem_mib": float,
         "hwm_mib": float, "source": str, "note": str, "reason": str},
        pk="id", if_not_exists=True)
    db["host_memory_samples"].create_index(["load_id", "ts"], if_not_exists=True)
    db["host_memory_cells"].create(
        {"id": int, "run_id": int, "load_id": int, "cell_id": int, "ts_from": str, "ts_to": str, "status": str,
         "n_samples": int, "peak_rss_mib": float, "median_rss_mib": float, "peak_pss_mib": float,
         "peak_uss_mib": float, "anon_mib": float, "file_mib": float, "hwm_mib": float},
        pk="id", if_not_exists=True)
    db["host_memory_cells"].create_index(["load_id"], if_not_exists=True)
    # the host's available memory before a load, and the fit verdict against the process's peak after it
    db["host_memory_checks"].create(
        {"id": int, "run_id": int, "model_id": int, "load_id": int, "ts": str, "available_mib": float,
         "total_mib": float, "required_mib": float, "basis": str, "source": str, "note": str},
        pk="id", if_not_exists=True)
    db["host_memory_checks"].create_index(["run_id", "model_id", "ts"], if_not_exists=True)
    # the fit test on a host: MemAvailable before the load, the server process's peak after its request
    for col, kind in (("host_available_mib", float), ("host_total_mib", float), ("host_peak_mib", float),
                      ("host_anon_mib", float), ("host_verdict", str)):
        if col not in db["fit_checks"].columns_dict:
            db["fit_checks"].add_column(col, kind)
    # energy counters read at each cell's start and end, and twice around an idle wait before the run
    db["energy_readings"].create(
        {"id": int, "run_id": int, "cell_id": int, "phase": str, "ts": str, "mono_s": float, "source": str,
         "domain": str, "joules": float, "wrap_joules": float, "note": str, "reason": str},
        pk="id", if_not_exists=True)
    db["energy_readings"].create_index(["run_id", "cell_id"], if_not_exists=True)
    for table in ("host_memory_samples", "host_memory_cells", "host_memory_checks", "energy_readings"):
        follow_rows(db, table)


@migrations(name="m030_quality_checks")
def m030_quality_checks(db: sqlite_utils.Database) -> None:
    # [quality] (daemon/quality): one row per model or variant measured against its ladder's base with
    # llama-perplexity, or refused with the reason; the tool's lines are the load's log_lines, each figure
    # a fact citing its line, and evidence_json names the line of every figure of the row
    db["quality_checks"].create(
        {
            "id": int, "run_id": int, "position": int,
            "model_id": int,  # what was measured: a ladder member, the base, or a variant's model (base~name)
            "base_model_id": int,  # the ladder's base, whose logits are the reference
            "load_id": int,  # the llama-perplexity process (loads.trigger = 'quality'), its lines and facts
            "role": str,  # base | member | variant
            "variant": str,  # the [variants] name, for a variant
            "status": str,  # measured | refused | failed
            "reason_text": str, "reason_json": str,
            "requantized_from": str,  # the base was made from this model (its KLD measures rounding)
            "text_name": str, "text_sha256": str, "context_tokens": int, "chunks_asked": int, "chunks": int,
            "binary": str, "args_json": str,
            "kld_mean": float, "kld_mean_err": float, "kld_median": float, "kld_p99": float, "kld_max": float,
            "same_top": float, "same_top_err": float,  # percent of positions with the base's top token
            "ppl": float, "ppl_err": float, "ppl_base": float, "ppl_base_err": float,
            "ppl_ratio": float, "ppl_ratio_err": float,
            "evidence_json": str,  # figure -> log_lines id
            "log_path": str, "seconds": float, "started_at": str, "ended_at": str,
        },
        pk="id",
        foreign_keys=[("run_id", "runs", "id"), ("model_id", "models", "id"), ("base_model_id", "models", "id"),
                      ("load_id", "loads", "id")],
        if_not_exists=True,
    )
    db["quality_checks"].create_index(["run_id"], if_not_exists=True)
    follow_rows(db, "quality_checks")


@migrations(name="m031_frozen_campaign")
def m031_frozen_campaign(db: sqlite_utils.Database) -> None:
    # the campaign as parsed when a run froze it (daemon/campaign/frozen.py), so a later parser never
    # changes how an old run reads; runs frozen before are parsed here, once, NULL where they no longer parse
    db["campaigns"].add_column("campaign_json", str)
    rows = db.execute("select id, toml_text from campaigns").fetchall()
    if rows and _campaign_normaliser is None:  # a caller's mistake: it opened a store before importing the reader
        raise RuntimeError("m031 needs the campaign reader: import cardproof.daemon.campaign.frozen first")
    for campaign_id, text in rows:
        db.execute("update campaigns set campaign_json = ? where id = ?",
                   [_campaign_normaliser(text or ""), campaign_id])
