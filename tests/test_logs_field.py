"""Logs as users hand them over: collector and container prefixes, process boundaries,
the server's own request counters, and logs in no known format.

The server lines are real (tests/fixtures/logs/real/, see its README, and
lines quoted from public issues where named). Prefixes: journald's come from
the real ``journalctl`` reading a real journal file written by
``systemd-journal-remote``; docker, kubectl, podman and compose cannot run
here, so their prefixes are put on the real lines in the formats those tools
document (RFC 3339 with nanoseconds, ``service  | ``) -- said so where used.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.logs import capture_file, import_path, load_summaries
from cardproof.daemon.logs.lines import clean_stamped
from cardproof.daemon.logs.observed import RequestCounters
from cardproof.daemon.store import open_store

REAL = Path(__file__).parent / "fixtures" / "logs" / "real"
POSEIDON = REAL / "poseidon-rocm-then-cpu.log"
JOURNAL_REMOTE = "/lib/systemd/systemd-journal-remote"
# poseidon, read by hand: the wrapper's banner (1-7, 62-68), process 1 (8-61), process 2 (69-125)
P1, P2 = range(8, 62), range(69, 126)


@pytest.fixture
def store(tmp_path):
    s = open_store(tmp_path / "t.db")
    yield s
    s.close()


def owners(store) -> dict[int, int]:
    """line number in the imported file (1-based) -> position of its load in load order."""
    rows = store.db.execute("select id, load_id from log_lines order by id").fetchall()
    order = {ld["id"]: n for n, ld in enumerate(load_summaries(store.db))}
    return {lid - rows[0][0] + 1: order[load] for lid, load in rows if load is not None}


def poseidon_truth() -> dict[int, int]:
    return {**{n: 0 for n in P1}, **{n: 1 for n in P2}}


# -- collector prefixes ---------------------------------------------------------------------

def _export(message: str, pid: int, t_us: int, ident: str) -> bytes:
    data = message.encode()
    fields = [f"__REALTIME_TIMESTAMP={t_us}", f"__MONOTONIC_TIMESTAMP={t_us % 10**9}",
              "_BOOT_ID=0123456789abcdef0123456789abcdef", f"_PID={pid}", "_HOSTNAME=gpu-box",
              f"SYSLOG_IDENTIFIER={ident}", "_SYSTEMD_UNIT=llama.service"]
    return b"".join(f.encode() + b"\n" for f in fields) + b"MESSAGE\n" + len(data).to_bytes(8, "little") + data + b"\n\n"


@pytest.mark.parametrize("output", ["short", "short-precise", "short-iso", "short-iso-precise", "short-full",
                                    "short-monotonic", "short-delta", "short-unix"])
def test_journalctl_text_output_reads_like_the_plain_log(output, tmp_path, store):
    """The wrapper (PID 100) and the two servers (PIDs 101, 102) as journald records them, exported by the
    real journalctl as text: the prefix is stripped, its PID keeps the processes apart, short-iso keeps the time."""
    # journalctl prints no entry for an empty message: the four blank lines stay out
    kept = [(n, m) for n, m in enumerate(POSEIDON.read_text().splitlines(), 1) if m]
    lines = [m for _, m in kept]
    pids = [101 if n in P1 else 102 if n in P2 else 100 for n, _ in kept]
    t0 = 1_750_000_000_000_000
    data = b"".join(_export(m, p, t0 + i * 1000, "bash" if p == 100 else "llama-server")
                    for i, (m, p) in enumerate(zip(lines, pids)))
    journal = tmp_path / "j.journal"
    subprocess.run([JOURNAL_REMOTE, "-o", str(journal), "-"], input=data, check=True, capture_output=True)
    text = subprocess.run(["journalctl", "--file", str(journal), "-o", output, "--no-pager", "-q"],
                          check=True, capture_output=True, text=True, env={**os.environ, "TZ": "UTC"}).stdout
    exported = tmp_path / f"{output}.txt"
    exported.write_text(text)
    assert len(text.splitlines()) == len(lines)
    import_path(store, exported)
    truth = poseidon_truth()
    assert owners(store) == {i: truth[n] for i, (n, _) in enumerate(kept, 1) if n in truth}
    loads = load_summaries(store.db)
    assert [(ld["pid"], ld["end_reason"]) for ld in loads] == [(101, "process exit"), (102, "process exit")]
    assert loads[0]["facts"]["load_seconds"] == pytest.approx(0.886130)
    first = store.db.execute("select ts from log_lines order by id limit 1").fetchone()[0]
    if output in ("short", "short-precise"):
        assert first is None  # "Jun 12 15:06:40" has no year: kept in the raw line, not guessed
    elif output in ("short-monotonic", "short-delta"):
        assert first is None  # seconds since boot: no wall clock
    else:
        expected = datetime.fromtimestamp(t0 / 1e6, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        assert first.startswith(expected) and first.endswith("+00:00")


def _stamp(i: int) -> datetime:
    return datetime(2026, 5, 17, 10, 44, 25, tzinfo=timezone.utc) + timedelta(milliseconds=37 * i)


# prefix styles as the tools document them (no container runtime here): the same server lines behind them
PREFIXES = {
    "docker logs -t": lambda i: _stamp(i).strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z ",
    "kubectl logs --timestamps": lambda i: _stamp(i).strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z ",
    "podman logs -t": lambda i: (_stamp(i).astimezone(timezone(timedelta(hours=2)))
                                 .strftime("%Y-%m-%dT%H:%M:%S.%f") + "789+02:00 "),
    "docker compose logs": lambda i: "llama-server-1  | ",
    "docker compose logs -t": lambda i: "llama-server-1  | " + _stamp(i).strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z ",
    "log viewer export": lambda i: _stamp(i).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " | ",
}


@pytest.mark.parametrize("style", sorted(PREFIXES))
def test_container_prefixes_are_stripped_once_and_their_time_kept(style, tmp_path, store):
    lines = POSEIDON.read_text().splitlines()
    prefixed = tmp_path / "prefixed.log"
    prefixed.write_text("".join(PREFIXES[style](i) + ln + "\n" for i, ln in enumerate(lines)))
    stats = import_path(store, prefixed)
    assert stats["lines"] == len(lines)
    assert owners(store) == poseidon_truth()
    loads = load_summaries(store.db)
    # the server's own relative time behind the prefix is still the load time
    assert [ld["facts"]["load_seconds"] for ld in loads] == [pytest.approx(0.886130), pytest.approx(0.803788)]
    assert [ld["observed"]["count"] for ld in loads] == [1, 1]
    raw, ts = store.db.execute("select raw, ts from log_lines order by id limit 1").fetchone()
    assert raw == PREFIXES[style](0) + lines[0]  # stored unchanged
    if "compose logs" == style[-12:]:
        assert ts is None
    elif style == "log viewer export":
        assert ts == "2026-05-17T10:44:25.000000"  # no zone printed: the line's own clock, not converted
    else:
        assert ts == "2026-05-17T10:44:25.000000+00:00"


def test_compose_services_are_separate_streams(tmp_path, store):
    """Two services in one `docker compose logs`: the web UI's lines never join the server's load."""
    lines = POSEIDON.read_text().splitlines()[7:61]  # process 1 alone
    mixed = []
    for i, ln in enumerate(lines):
        mixed.append("llama  | " + ln)
        if i % 5 == 0:
            mixed.append(f'webui  | INFO:     172.18.0.1:{40000 + i} - "GET /api/models HTTP/1.1" 200 OK')
    path = tmp_path / "compose.log"
    path.write_text("\n".join(mixed) + "\n")
    import_path(store, path)
    rows = store.db.execute("select raw, load_id from log_lines order by id").fetchall()
    assert all((load is None) == raw.startswith("webui") for raw, load in rows)
    assert len(load_summaries(store.db)) == 1


def test_prefix_lookalikes_are_left_alone():
    # llama.cpp's own table, a JSON line, an ik_llama INFO line, a GIN line: no prefix to strip
    for text in ("llama_memory_breakdown_print: | memory breakdown [MiB] | total   free",
                 '{"tid":"14964","timestamp":1717067386,"level":"INFO","function":"print_timings"}',
                 'INFO [      log_server_request] request | tid="1" timestamp=2 status=200',
                 '[GIN] 2025/12/23 - 10:34:40 | 200 | 57.956598944s |   192.168.0.131 | POST     "/api/chat"',
                 "0.00.002.814 I build: 8233 (c5a778891) with GNU 14.2.0 for Linux x86_64"):
        assert clean_stamped(text) == (None, None, text, None, None), text
    # a stamp strips once: what follows it is the server's, even when it looks like "host ident: "
    assert clean_stamped("2026-05-17T10:44:25.123456789Z system info: n_threads = 8")[2] == "system info: n_threads = 8"
    # journald's kernel line names another process in its text: only the collector's prefix goes
    port, pid, text, _, stream = clean_stamped("May 15 08:57:36 red kernel: llama-server[80906]: segfault at 2048")
    assert (pid, stream, text) == (None, "kernel", "llama-server[80906]: segfault at 2048")
    # an impossible date: prefix stripped, no stamp invented
    assert clean_stamped("2026-13-45T10:44:25Z main: model loaded")[2:4] == ("main: model loaded", None)


# -- process boundaries ---------------------------------------------------------------------------

def test_a_crash_marks_the_load_and_its_backtrace_stays_with_it(tmp_path, store):
    """Process 1 of poseidon (real), then the CUDA error lines of ik_llama.cpp issue #425 (real, their
    journald prefix removed), then process 2: the crash ends load 1, the next start opens load 2."""
    lines = POSEIDON.read_text().splitlines()
    crash = [ln.split(": ", 1)[1] for ln in (REAL / "ik-llama-issue425-journald-cuda.log").read_text().splitlines()
             if "llama-swap[" in ln][2:]
    text = lines[7:60] + crash + lines[68:]
    path = tmp_path / "crash.log"
    path.write_text("\n".join(text) + "\n")
    import_path(store, path)
    loads = load_summaries(store.db)
    assert len(loads) == 2
    assert loads[0]["end_reason"] == "crashed: CUDA error" and not loads[0]["open"]
    assert loads[0]["facts"]["cuda_error"] == ["an illegal memory access was encountered"]
    assert loads[0]["lines"] == 53 + len(crash)
    assert loads[1]["end_reason"] == "process exit" and "cuda_error" not in loads[1]["facts"]


def test_a_rocm_error_ends_the_load_as_a_device_error(tmp_path, store):
    """Process 1 of poseidon (real, an RX 7700 XT under ROCm), then the ROCm error lines of
    likelovewant/ollama-for-amd issue #37 (real), then process 2: the ROCm error ends load 1 as a CUDA
    error ends a load, and is its device error."""
    lines = POSEIDON.read_text().splitlines()
    crash = (REAL / "ollama-for-amd-issue37-rocm-error.log").read_text().splitlines()[12:17]
    path = tmp_path / "rocm-crash.log"
    path.write_text("\n".join(lines[7:60] + crash + lines[68:]) + "\n")
    import_path(store, path)
    loads = load_summaries(store.db)
    assert len(loads) == 2
    assert loads[0]["end_reason"] == "crashed: ROCm error" and not loads[0]["open"]
    assert loads[0]["facts"]["cuda_error"] == ["ROCm error: invalid device function"]
    assert loads[1]["end_reason"] == "process exit" and "cuda_error" not in loads[1]["facts"]


def test_a_server_still_running_at_the_end_has_an_open_load_and_resumes(tmp_path, store):
    """The metal log cut in two: the first import ends mid-run (open load), the second continues it;
    a request block split across the two imports is still one request."""
    lines = (REAL / "llama-runner-metal-2026.log").read_text().splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(lines) if ln.startswith("slot print_timing: id  0 | task 65")) + 2
    path = tmp_path / "growing.log"
    path.write_text("".join(lines[:cut]))
    capture_file(store, path)
    (ld,) = load_summaries(store.db)
    assert ld["open"] and ld["observed"]["count"] == 1
    with open(path, "a") as f:
        f.write("".join(lines[cut:]))
    capture_file(store, path, final=True)
    (ld,) = load_summaries(store.db)
    assert ld["lines"] == len(lines) and ld["open"]
    rows = store.db.execute("select task, prompt_tokens, generated_tokens from observed_requests order by id").fetchall()
    assert rows == [(0, 1331, 62), (65, 4914, 717)]


def test_one_pid_starting_twice_is_a_proxy_and_proves_nothing(tmp_path, store):
    """llama-swap writes its servers' lines under its own PID: the second start makes the stream unprovable."""
    lines = POSEIDON.read_text().splitlines()
    path = tmp_path / "swap.txt"
    path.write_text("".join(f"Nov 30 12:00:01 gpu llama-swap[777]: {ln}\n" for ln in lines[7:61] + lines[68:]))
    stats = import_path(store, path)
    (ld,) = load_summaries(store.db)
    assert ld["lines"] == 54  # the first server's lines, until the second start
    assert stats["unplaced"]["several_servers"] == len(lines[68:])


# -- the server's own request counters --------------------------------------------------------------

def test_request_counters_in_every_shape():
    # ggml-org/llama.cpp issue #27151 (2026, one line per figure, acceptance with "mean len")
    one_line = [
        "1.38.855.984 I slot print_timing: id  0 | task 0 | prompt eval time =   35224.59 ms / 24419 tokens "
        "(    1.44 ms per token,   693.24 tokens per second)",
        "1.38.855.987 I slot print_timing: id  0 | task 0 |        eval time =    9692.30 ms /   213 tokens "
        "(   45.72 ms per token,    21.87 tokens per second)",
        "1.38.855.988 I slot print_timing: id  0 | task 0 |       total time =   44916.90 ms / 24632 tokens",
        "1.38.855.993 I slot print_timing: id  0 | task 0 | draft acceptance = 0.00158 (    1 accepted /   633 "
        "generated), mean len =  1.00",
    ]
    # am17an/llama.cpp pull request #6 (MTP, a block without timestamps)
    block = [
        "slot print_timing: id  3 | task 0 | ",
        "prompt eval time =    8584.47 ms /  3258 tokens (    2.63 ms per token,   379.52 tokens per second)",
        "       eval time =    1287.69 ms /    57 tokens (   22.59 ms per token,    44.27 tokens per second)",
        "      total time =    9872.17 ms /  3315 tokens",
        "draft acceptance rate = 1.00000 (   36 accepted /    36 generated)",
    ]
    # ggml-org/llama.cpp issue #9013 (2024 INFO format): the generation line of that task, same shape
    info = ['INFO [           print_timings] prompt eval time     =     222.95 ms /    12 tokens (   18.58 ms per '
            'token,    53.82 tokens per second) | tid="11744" timestamp=1723514879 id_slot=0 id_task=0',
            'INFO [           print_timings] generation eval time =    6485.43 ms /   660 runs   (    9.83 ms per '
            'token,   101.77 tokens per second) | tid="11744" timestamp=1723514879 id_slot=0 id_task=0']
    got = []
    for chunk, load in ((one_line, 1), (block, 2), (info, 3)):
        rc = RequestCounters()
        for i, text in enumerate(chunk):
            rc.feed(100 * load + i, load, text, None)
        got += [(r["task"], r["prompt_tokens"], r["prompt_ms"], r["generated_tokens"], r["decode_ms"],
                 r["draft_accepted"], r["draft_generated"]) for r in rc.rows]
    assert got == [(0, 24419, 35224.59, 213, 9692.30, 1, 633), (0, 3258, 8584.47, 57, 1287.69, 36, 36),
                   (0, 12, 222.95, 660, 6485.43, None, None)]


def test_damaged_counters_are_skipped_not_fatal():
    rc = RequestCounters()
    rc.feed(1, 1, "slot print_timing: id  0 | task 7 | prompt eval time = 1.2.3 ms / 9 tokens", None)
    rc.feed(2, 1, "slot print_timing: id  0 | task 7 |        eval time = 4.5.6 ms / 3 tokens", None)
    rc.feed(3, 1, "slot print_timing: id  0 | task 8 |        eval time = 50.00 ms / 5 tokens", None)
    assert [(r["task"], r["prompt_tokens"], r["generated_tokens"]) for r in rc.rows] == [(8, None, 5)]


# -- the command line ------------------------------------------------------------------------------

def test_unknown_format_imports_with_one_summary_line_and_loses_nothing(tmp_path):
    lines = [f'10.0.0.{i} - - [17/May/2026:10:44:{i:02d} +0000] "GET /v1/models HTTP/1.1" 200 578 "-" "curl/8.5.0"'
             for i in range(40)] + ["\x1b[31mpanic: something else entirely\x1b[0m", ""]
    path = tmp_path / "nginx.log"
    path.write_text("\n".join(lines) + "\n")
    db = tmp_path / "t.db"
    result = CliRunner().invoke(cli, ["logs", "import", str(path), "--db", str(db)])
    assert result.exit_code == 0, result.output
    out = result.output.splitlines()
    assert len(out) == 2 and "0 loads found" in out[0]
    assert out[1].endswith(f"{len(lines)} outside any server process (before its start lines, after its exit, "
                           "or a log that begins mid-run)")
    shown = CliRunner().invoke(cli, ["logs", "show", "--unplaced", "--json", "--db", str(db)])
    assert [ln["text"] for ln in json.loads(shown.output)["lines"]] == lines
    text = CliRunner().invoke(cli, ["logs", "show", "--unplaced", "--db", str(db)]).output
    assert "\x1b" not in text and "\\x1b[31mpanic" in text  # colour codes shown, not executed


def test_loads_and_logs_show_on_the_command_line(tmp_path):
    db = tmp_path / "t.db"
    assert CliRunner().invoke(cli, ["logs", "import", str(POSEIDON), "--db", str(db)]).exit_code == 0
    listing = CliRunner().invoke(cli, ["loads", "--db", str(db)]).output.splitlines()
    assert len(listing) == 2
    assert re.search(r"observed 1 requests \(server's counters, not measured\): decode 185\.33 tok/s "
                     r"\(185\.33-185\.33, n=1\), prefill 714\.55 tok/s", listing[0])
    # no llama_context n_ctx line, but 4 slots of one unified cache: the load's context is 8192
    assert "process exit" in listing[0] and "ctx 8192; 4 slots" in listing[0]
    loads = json.loads(CliRunner().invoke(cli, ["loads", "--json", "--db", str(db)]).output)
    assert [(ld["open"], ld["end_reason"], ld["observed"]["count"]) for ld in loads] == [
        (False, "process exit", 1), (False, "process exit", 1)]
    shown = json.loads(CliRunner().invoke(cli, ["logs", "show", str(loads[1]["id"]), "--json", "--db", str(db)]).output)
    file_lines = POSEIDON.read_text().splitlines()
    assert [ln["text"] for ln in shown["lines"]] == file_lines[68:125]
    assert shown["observed_requests"][0]["generated_tokens"] == 16
    bad = CliRunner().invoke(cli, ["logs", "show", "999", "--db", str(db)])
    assert bad.exit_code == 2 and "no load 999" in bad.output


def test_absurd_numbers_in_counter_lines_are_no_request_and_no_crash(tmp_path, store):
    """A damaged line's 400-digit count fits no integer column; the import goes on without it."""
    lines = POSEIDON.read_text().splitlines()[7:61]
    at = next(i for i, ln in enumerate(lines) if ln.startswith("prompt eval time"))
    huge = "9" * 400
    lines[at] = f"prompt eval time =      26.59 ms / {huge} tokens (    1.40 ms per token,   714.47 tokens per second)"
    lines.insert(at + 3, f"0.01.001.100 I slot   load_model: id  0 | task -1 | new slot, n_ctx = {huge}")
    path = tmp_path / "damaged.log"
    path.write_text("\n".join(lines) + "\n")
    stats = import_path(store, path)
    assert stats["lines"] == len(lines)
    (ld,) = load_summaries(store.db)
    # the request still has its generation counters; its prompt figures are gone, not invented
    assert store.db.execute("select prompt_tokens, generated_tokens from observed_requests").fetchall() == [(None, 12)]
    assert ld["facts"]["slot_ctx_size"] == 8192  # the absurd slot line is no fact


def test_a_shell_job_notice_is_no_router_port(tmp_path, store):
    """`llama-server ... &` in an interactive shell prints "[1] 4242": that stream is no router."""
    lines = ["[1] 4242"] + POSEIDON.read_text().splitlines()[7:61]
    path = tmp_path / "job.log"
    path.write_text("\n".join(lines) + "\n")
    import_path(store, path)
    (ld,) = load_summaries(store.db)
    assert ld["lines"] == 54 and ld["end_reason"] == "process exit"


def test_a_source_last_read_by_an_older_cardproof_resumes(tmp_path, store):
    """The stored state of a source from before the observed requests knew only load, pending and ended per stream."""
    lines = POSEIDON.read_text().splitlines(keepends=True)
    path = tmp_path / "older.log"
    path.write_text("".join(lines[:40]))
    capture_file(store, path)
    sid, state = store.db.execute("select id, state_json from log_sources").fetchone()
    state = json.loads(state)
    state["procs"] = {k: {"load": v["load"], "pending": v["pending"]} for k, v in state["procs"].items()}
    del state["observed"]
    with store.db.conn:
        store.db.conn.execute("update log_sources set state_json = ? where id = ?", [json.dumps(state), sid])
    with open(path, "a") as f:
        f.write("".join(lines[40:]))
    capture_file(store, path, final=True)
    assert owners(store) == poseidon_truth()


def test_buffers_named_apart_still_count_as_card_memory(tmp_path, store):
    """The SWA KV cache and the projector's compute buffer are their own facts now; the self-report the
    memory section compares with the card still adds every buffer line (metal log, read by hand)."""
    from cardproof.daemon.memory.selfreport import facts_selfreport

    import_path(store, REAL / "llama-runner-metal-2026.log")
    facts = [dict(zip(("name", "device", "value_num", "line_id"), r)) for r in store.db.execute(
        "select name, device, value_num, line_id from facts where load_id is not null")]
    report = facts_selfreport(facts)
    # model 680.00 + 7,798.32, KV 1,024.00 + SWA 40.00, compute 517.50 + 140.02, projector 101.27 + 6.77, output 1.00
    assert report["total_mib"] == pytest.approx(10308.88)


def test_slot_and_adapter_lines_of_every_era():
    from cardproof.daemon.logs.parsers import parse_line

    def facts(text):
        return {(f.name, f.device): f.value_num for f in parse_line(text)}

    # ikawrakow/ik_llama.cpp pull request #558 (2025): the INFO format
    assert facts('INFO [                    init] new slot | tid="140147414781952" timestamp=1751293931 id_slot=0 '
                 'n_ctx_slot=32768') == {("slot_ctx_size", None): 32768}
    # ggml-org/llama.cpp issue #5930 (2024): the JSON log format
    assert facts('{"function":"initialize","level":"INFO","line":433,"msg":"initializing slots","n_slots":1,'
                 '"tid":"12388","timestamp":1709862836}') == {("slots", None): 1}
    # 2026: one line for both (ggml-org/llama.cpp issue #26188)
    assert facts("0.10.913.035 I srv    load_model: initializing, n_slots = 1, n_ctx_slot = 65536, "
                 "kv_unified = 'true'") == {("slots", None): 1, ("slot_ctx_size", None): 65536,
                                            ("kv_unified", None): None}
    # ngxson/llama.cpp pull request #9 (2024): a LoRA adapter's buffers, per device
    lora = ["llama_lora_adapter_init_internal:  CUDA_Host LoRA buffer size =    18.08 MiB",
            "llama_lora_adapter_init_internal:      CUDA0 LoRA buffer size =   110.00 MiB",
            "llama_lora_adapter_init_internal:      CUDA1 LoRA buffer size =    40.00 MiB"]
    assert [facts(x) for x in lora] == [{("lora_buffer_mib", "CUDA_Host"): 18.08},
                                        {("lora_buffer_mib", "CUDA0"): 110.0}, {("lora_buffer_mib", "CUDA1"): 40.0}]
