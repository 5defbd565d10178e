"""A crashed server is a finding: the signal, what it usually means, and the load it ended.

Real parts: the real llama-server (single-model and router mode, tiny
models) killed with real signals, a real bash script as its start script
(docker images start llama-server that way), real SQLite stores, the
runner, ``cardproof loads`` and the report's own renderer. The field shapes
are published lines, each with its address; the corpus files are byte-exact
excerpts of public logs (tests/fixtures/logs/real/README.md). Where a shape
is constructed (systemd's, the kernel's OOM line) the test says so.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from cardproof.cli import cli
from cardproof.daemon.store import crashes
from cardproof.daemon.server import llamacpp
from cardproof.daemon.backends.llamaserver import LlamaServerBackend
from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.logs import import_path, load_summaries
from cardproof.daemon.logs.lines import clean
from cardproof.daemon.logs.parsers import parse_line
from cardproof.daemon.memory.procinfo import children
from cardproof.daemon.run.runner import router_child_pid, run_campaign
from cardproof.daemon.store import open_store
from cardproof.report.i18n import CATALOGUE, Lang
from cardproof.report.observations import end_reason
from conftest import campaign_text

REAL = Path(__file__).parent / "fixtures" / "logs" / "real"
SIGILL_MEANING = "illegal instruction: the binary uses CPU features this machine does not allow"


def crash(raw: str) -> str | None:
    """The crash signal one raw line states, through the importer's own cleaning."""
    found = [f for f in parse_line(clean(raw)[2]) if f.name == "crash_signal"]
    assert len(found) <= 1
    if found:
        assert found[0].value_num == crashes.SIGNALS[found[0].value_text].number
    return found[0].value_text if found else None


# -- one table for the live path and the parser ---------------------------------------

def test_the_table_is_the_platforms_signals_and_both_ways_of_counting():
    for key in ("SIGILL", "SIGABRT", "SIGBUS", "SIGFPE", "SIGKILL", "SIGSEGV"):
        n = int(getattr(signal, key))
        assert crashes.SIGNALS[key].number == n
        assert crashes.from_returncode(-n).key == key  # Python's Popen
        assert crashes.from_exit_code(128 + n).key == key  # a shell's, docker's
    assert crashes.from_exit_code(132).key == "SIGILL" and crashes.from_exit_code(139).key == "SIGSEGV"
    assert crashes.from_exit_code(0xC000001D).key == "SIGILL"  # Windows' STATUS_ILLEGAL_INSTRUCTION
    # how a server is stopped is no crash; nor is an ordinary failing exit
    assert crashes.from_exit_code(143) is None and crashes.from_exit_code(130) is None
    assert crashes.from_exit_code(1) is None and crashes.from_returncode(1) is None
    assert crashes.from_returncode(-int(signal.SIGTERM)) is None
    assert crashes.by_name("ILL").key == "SIGILL" and crashes.by_name("Segmentation fault").key == "SIGSEGV"
    assert crashes.from_end_reason("crashed: SIGILL").key == "SIGILL"
    assert crashes.from_end_reason("crashed: GGML_ASSERT(x) failed") is None
    assert crashes.SIGNALS["SIGILL"].meaning == SIGILL_MEANING


def test_every_meaning_is_said_in_german():
    de, en = Lang("de"), Lang("en")
    for sig in crashes.SIGNALS.values():
        assert sig.meaning in CATALOGUE, sig.key
        german = str(end_reason(de, crashes.end_reason(sig)))
        assert german.startswith("abgestürzt: `") and CATALOGUE[sig.meaning] in german and sig.meaning not in german
        assert str(end_reason(en, crashes.end_reason(sig))) == f"crashed: `{sig.key}` ({sig.meaning})"
    router = str(end_reason(de, crashes.router_died(1)))
    assert router.startswith("abgestürzt: ungefragt beendet mit Status 1 (") and "router reports" not in router


# -- the field's shapes ---------------------------------------------------------------

PUBLISHED = [
    # a docker image's start script run by bash: AmpereComputingAI/llama.cpp issue 20 (title)
    ('/start.sh: line 3: 10 Illegal instruction (core dumped) /llm/llama-server "$@"', "SIGILL"),
    # https://github.com/ggml-org/llama.cpp/issues/23100 (the console, then dmesg)
    ("Illegal instruction (core dumped)", "SIGILL"),
    ("[  422.589453] traps: llama-server[13200] trap invalid opcode ip:7f29c636ec6d sp:7ffc0fc20000 error:0 "
     "in libggml-cpu.so.0[1bc6d,7f29c6364000+101000]", "SIGILL"),
    # https://github.com/intel/ipex-llm/issues/12922: bash's padding before "(core dumped)"
    ("start-vllm-service.sh: line 18:  1669 Illegal instruction     (core dumped) python -m ipex_llm.vllm.cpu."
     "entrypoints.openai.api_server --served-model-name $served_model_name --port 8001", "SIGILL"),
    # Ollama: https://github.com/mattcurf/ollama-intel-gpu/issues/32 (title), ollama/ollama issues 516 and 1019
    ('llama runner process no longer running" sys=132 string="signal: illegal instruction (core dumped)', "SIGILL"),
    ("2023/09/26 23:40:47 llama.go:320: llama runner exited with error: signal: illegal instruction", "SIGILL"),
    ("2023/11/16 15:44:45 llama.go:430: signal: segmentation fault", "SIGSEGV"),
    # Ollama on Windows: ollama/ollama issue 4794 (title), likelovewant/ollama-for-amd issue 16 (title)
    ("Error: llama runner process has terminated: exit status 0xc000001d", "SIGILL"),
    ('error="llama runnerprocess has terminated: exit status 0xc0000005"', "SIGSEGV"),
    # docker model-runner (Go too): https://github.com/docker/model-runner/issues/71
    ('on mode failed: llama.cpp terminated unexpectedly: signal: illegal instruction (core dumped)"', "SIGILL"),
    # docker-compose v1: https://github.com/ParisNeo/lollms-webui/issues/69; docker run: Cinnamon/kotaemon issue 689
    ("gpt4all-ui_webui_1 exited with code 132", "SIGILL"),
    ("exit status 132", "SIGILL"),
    # fish and llamafile: https://github.com/mozilla-ai/llamafile/issues/377 (title)
    ("'./llamafile-0.8.1 -m phi-2-unce…' terminated by signal SIGILL (Illegal instruction)", "SIGILL"),
    # gdb: https://github.com/antimatter15/alpaca.cpp/issues/170, ggml-org/llama.cpp issue 11196
    ("Program received signal SIGILL, Illegal instruction.", "SIGILL"),
    ('Thread 1 "llama-server" received signal SIGSEGV, Segmentation fault.', "SIGSEGV"),
    # ggml's own abort: https://github.com/ggml-org/llama.cpp/issues/17060 (a backtrace frame)
    ("libggml-base.so(ggml_abort+0x152)[0x72edb99cda02]", "SIGABRT"),
    # compose's service prefix and journald's are stripped before the parser sees the line
    ("llama-cpp  | Illegal instruction (core dumped)", "SIGILL"),
    ("May 15 08:57:36 red kernel: llama-server[80906]: segfault at 204803fe0 ip 00007f00399189d7 sp "
     "00007ffc4a6104f0 error 4 in libggml-cuda.so[7f0039800000+2e00000]", "SIGSEGV"),
    # Go's runtime when the signal arrives in C code (Ollama's runner): ollama/ollama issues 9500, 9176
    # (SIGILL) and 9509 (SIGABRT, behind Docker Desktop's timestamp); in Go code: golang's "[signal ...]" form
    ("SIGILL: illegal instruction", "SIGILL"),
    ("2025-03-05 08:58:42 SIGABRT: abort", "SIGABRT"),
    # ... and on Windows: ollama/ollama issue 2573 and intel/ipex-llm issue 12914 (0xc000001d),
    # ollama/ollama issues 15170 and 11255 (0xc0000005)
    ("Exception 0xc000001d 0x0 0x0 0x7ff8729a99dd", "SIGILL"),
    ("Exception 0xc0000005 0x0 0x50 0x7ffc89efc5c7", "SIGSEGV"),
    # journalctl's pager cut the line short: ollama/ollama issue 630
    ("Oct 06 15:01:20 CX600 ollama[1992]: 2023/10/06 15:01:20 llama.go:323: llama runner exited with error: "
     "signal: illegal ins>", "SIGILL"),
    # abort() on Windows ends a process with 0xc0000409: ollama/ollama issues 4442, 7031 (titles), 11418
    # (where Ollama quotes the runner's GGML_ASSERT right after)
    ("Error: llama runner process has terminated: exit status 0xc0000409", "SIGABRT"),
    # Rust's ExitStatus, Windows' 0xc000001d as a number: janhq/jan issue 6065 (Jan runs llama-server)
    ("Failed to load llama-server: llamacpp error: Process exited with code ExitStatus(ExitStatus(3221225501))",
     "SIGILL"),
    # bash, padded before the command: lmstudio-ai/lmstudio-bug-tracker issue 1885
    ("Illegal instruction        (core dumped) .lmstudio/bin/lms", "SIGILL"),
    ('bash: line 603: 20480 Illegal instruction        (core dumped) "$_lms_installed_path" bootstrap -y > '
     '/dev/null 2>&1', "SIGILL"),
    # glibc's Chinese words: su77ungr/CASALIOY issue 59
    ("非法指令 (核心已转储)", "SIGILL"),
    # llama-swap's own words on its upstream: mostlygeek/llama-swap pull request 155
    ("[DEBUG] <qwen-coder-14B-FIM> cmd.Wait() returned error: signal: aborted (core dumped)", "SIGABRT"),
    # the C++ runtime on an uncaught exception: ggml-org/llama.cpp issue 12939 (llama-server -hf), then bash's
    # "Aborted (core dumped)"; libc++ and cosmopolitan (llamafile): mozilla-ai/llamafile issues 785 and 721
    ("terminate called after throwing an instance of 'std::runtime_error'", "SIGABRT"),
    ("Aug 07 06:19:14 xv14379 llama[5185]: libc++abi: terminating due to uncaught exception of type "
     "std::length_error: vector", "SIGABRT"),
    ("error: Uncaught SIGABRT (SI_0) on unknown pid 26726 tid 262152", "SIGABRT"),
    # GGML_ABORT's "file:line: message" (ik_llama.cpp issue 733, title "mmq.cuh:4254: fatal error") and ggml's
    # terminate handler in gdb's backtrace (ggml-org/llama.cpp issue 20129)
    ("/opt/ik_llama.cpp/ik_llama.cpp/ggml/src/ggml-cuda/mmq.cuh:4254: fatal error", "SIGABRT"),
    ("#2  0x00007077fd4c5fff in ggml_uncaught_exception() () from /home/xxxxx/llama.cpp/build-cuda/bin/"
     "libggml-base.so.0", "SIGABRT"),
    # systemd's own words for a unit's process the OOM killer took: ollama/ollama issue 11231,
    # ggml-org/llama.cpp issue 20509 (llama-server run as a service)
    ("Jun 28 08:05:50 nixos systemd[1]: ollama.service: Failed with result 'oom-kill'.", "OOM"),
    ("A process of this unit has been killed by the OOM killer.", "OOM"),
    # the kernel's OOM line as dmesg prints it: jncraton/languagemodels issue 31
    ("[300974.215769] Out of memory: Killed process 336943 (python) total-vm:20061840kB, anon-rss:13408616kB, "
     "file-rss:128kB, shmem-rss:0kB, UID:1000 pgtables:27924kB oom_score_adj:0", "OOM"),
    # systemd on a dumped core: ollama/ollama issue 1148
    ("Nov 15 21:48:43 ai-desktop systemd[1]: ollama.service: Main process exited, code=dumped, status=11/SEGV",
     "SIGSEGV"),
    # cargo's words for a test binary (riptidecrawler CI log): the signal's number and name
    ("process didn't exit successfully: `/home/runner/work/riptidecrawler/riptidecrawler/target/debug/deps/"
     "riptide_browser-a4425af831d438f9 --test-threads=1 --nocapture` (signal: 4, SIGILL: illegal instruction)",
     "SIGILL"),
]


@pytest.mark.parametrize("raw,key", PUBLISHED)
def test_published_crash_lines(raw, key):
    assert crash(raw) == key


def test_constructed_shapes_of_systemd_and_the_kernels_oom_killer():
    """Not published lines: the formats of systemd's service.c ("Main process exited, code=%s, status=%i/%s")
    and the kernel's mm/oom_kill.c ("Out of memory: Killed process %d (%s) ..."), filled in by hand."""
    assert crash("llama-server.service: Main process exited, code=killed, status=4/ILL") == "SIGILL"
    assert crash("llama-server.service: Main process exited, code=dumped, status=11/SEGV") == "SIGSEGV"
    assert crash("Out of memory: Killed process 4242 (llama-server) total-vm:98765432kB, anon-rss:1234kB") == "OOM"
    assert crash("Memory cgroup out of memory: Killed process 4242 (llama-server) total-vm:1kB") == "OOM"


@pytest.mark.parametrize("raw", [
    "llama-server.service: Main process exited, code=killed, status=15/TERM",  # a stop
    "ollama exited with code 0", "llama exited with code 143",  # docker stop: SIGTERM
    'msg="error loading llama server" error="llama runner process has terminated: exit status 2"',  # a Go panic
    'msg="llama runner terminated" error="signal: killed"',  # Ollama kills its runners on every unload
    "Killed process 4242 (llama-server) total-vm:1kB",  # the kernel's second OOM line: counted once
    "srv  cancel_tasks: request aborted by the client",
    "0.00.010.000 I srv  load_model: Killed requests: 0",
    # prose that begins with the words, or names them (issue titles: ggml-org/llama.cpp 8734 and 12401,
    # kennethleungty/Llama-2-Open-Source-LLM-CPU-Inference 13)
    "Illegal instruction error when running llama-server",
    "Eval bug: gfx1030 HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION when using rocm 6.3.3 while processing first 2k of context",
    'Any ideas what "Illegal Instruction" indicates?',
    # Go's other lines of the same panic (ollama/ollama issue 9500), and Windows' exit codes that are no signal:
    # a DLL not found or without the entry point (ollama/ollama issues 5643, anything-llm 1795)
    "PC=0x7f7fdc968f27 m=4 sigcode=2", "signal arrived during cgo execution",
    "Error: llama runner process has terminated: exit status 0xc0000139",
    "Ollama call failed with status code 500: llama runner process has terminated: exit status 0xc0000135",
    # the exception's message, after "terminate called ..." (ggml-org/llama.cpp issue 12939); gdb's other frames
    '  what():  error from HF API, response code: 500, data: {"error":"Internal Error - We\'re working hard to '
    'fix this as soon as possible!"}',
    "#1  0x00007077fd4b292b in ggml_print_backtrace () from /home/xxxxx/llama.cpp/build-cuda/bin/libggml-base.so.0",
])
def test_lines_that_are_no_crash(raw):
    assert crash(raw) is None


# -- third-party logs: each crash line, its signal, its load -----------------------------

#: file -> (line, signal, model of the load it ends or None); read by hand (README)
CORPUS = {
    "ik-llama-issue60-gdb-sigill.log": [(30, "SIGILL", None)],
    "llama-cpp-issue537-docker-tools-sh.log": [(16, "SIGILL", None)],
    "ollama-issue1603-journal-sigill.log": [(3, "SIGILL", None)],
    "ik-llama-issue503-zsh-segfault.log": [(124, "SIGSEGV", "Qwen3-32B-UD-Q4_K_XL.gguf")],
    # a failed assert, then the shell's "Aborted (core dumped)": the assert names the crash
    "ik-llama-pr645-draft-model-assert.log": [(536, "SIGABRT", "DeepSeek-R1-0528-UD-Q3_K_XL-00001-of-00007.gguf"),
                                              (543, "SIGABRT", "DeepSeek-R1-0528-UD-Q3_K_XL-00001-of-00007.gguf")],
    "ik-llama-issue425-journald-cuda.log": [(8, "SIGSEGV", None)],  # the kernel's segfault line
    # Go's runtime dying in the runner's C code, on Linux and on Windows; journalctl's pager cutting the line
    "ollama-issue9500-go-sigill-panic.log": [(8, "SIGILL", None)],
    "ollama-issue2573-windows-exception-sigill.log": [(5, "SIGILL", None)],
    "ollama-issue630-journal-pager-sigill.log": [(8, "SIGILL", None)],
}


def test_at_least_two_real_illegal_instruction_logs():
    ill = {name for name, found in CORPUS.items() if any(sig == "SIGILL" for _, sig, _ in found)}
    assert len(ill) >= 2 and all((REAL / name).exists() for name in ill)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_real_crash_log_reads_right(name, tmp_path):
    store = open_store(tmp_path / "t.db")
    try:
        import_path(store, REAL / name)
        db = store.db
        first = db.execute("select min(id) from log_lines").fetchone()[0]
        found = [(line - first + 1, sig, load) for line, sig, load in db.execute(
            "select line_id, value_text, load_id from facts where name = 'crash_signal' order by line_id")]
        loads = {ld["id"]: ld for ld in load_summaries(db)}
    finally:
        store.close()
    assert [(line, sig) for line, sig, _ in found] == [(line, sig) for line, sig, _ in CORPUS[name]]
    assert [loads[load]["model"] if load else None for _, _, load in found] == [m for _, _, m in CORPUS[name]]
    for _, sig, load in found:
        if load is None:
            continue
        ld = loads[load]
        # never ready: the load failed, and how it ended names the crash
        assert ld["status"] == "failed" and ld["end_reason"].startswith("crashed: ") and not ld["open"]
        if name == "ik-llama-issue503-zsh-segfault.log":
            assert ld["end_reason"] == "crashed: SIGSEGV" and ld["exit_status"] == -11
            assert ld["facts"]["crash_signal"] == "SIGSEGV"


def _journal_of(name: str, pid: int, kernel: list[str]) -> str:
    """A real single-server log (one llama.cpp b7342 process, up to "server is listening": still running)
    as ``journalctl`` prints it for the server's unit, the kernel's lines after it (the shapes of tests
    above: mm/oom_kill.c, the segfault report)."""
    lines = (REAL / name).read_text().splitlines()
    lines = lines[:next(i for i, line in enumerate(lines) if "server is listening" in line) + 1]
    body = "".join(f"Dec 05 10:00:00 gpu1 llama-server[{pid}]: {line}\n" for line in lines)
    return body + "".join(f"Dec 05 10:05:00 gpu1 kernel: {line}\n" for line in kernel)


@pytest.mark.parametrize("kernel, sig", [
    ("Out of memory: Killed process {pid} (llama-server) total-vm:48712144kB, anon-rss:31874404kB, file-rss:0kB, "
     "shmem-rss:0kB, UID:0 pgtables:63412kB oom_score_adj:0", "OOM"),
    ("llama-server[{pid}]: segfault at 204803fe0 ip 00007f00399189d7 sp 00007ffc4a6104f0 error 4 in "
     "libcuda.so.575.51.03[7f00395c5000+e97000] likely on CPU 11 (core 11, socket 0)", "SIGSEGV"),
])
def test_a_kernel_line_naming_the_servers_pid_ends_its_load(kernel, sig, tmp_path):
    """The kernel writes on its own stream, so its line about the server is no line of the server's; the
    PID it names ties it to the server's load, which then ended by that signal. A kernel line naming
    another process leaves the load as it was and stays outside every load."""
    name = "yuy4o-llm-b7342-docker-a100.log"
    for pid, ours in ((4242, True), (999, False)):
        log = tmp_path / f"{pid}.log"
        log.write_text(_journal_of(name, 4242, [kernel.format(pid=pid)]))
        store = open_store(tmp_path / f"{pid}.db")
        try:
            import_path(store, log)
            db = store.db
            last = db.execute("select id, load_id, attribution from log_lines order by id desc limit 1").fetchone()
            loads = load_summaries(db)
        finally:
            store.close()
        assert len(loads) == 1, loads
        ld = loads[0]
        if ours:
            assert (last[1], last[2]) == (ld["id"], "pid")
            assert ld["end_reason"] == f"crashed: {sig}" and ld["facts"]["crash_signal"] == sig
        else:
            assert last[1] is None and ld["end_reason"] is None and ld["open"]


def test_systemds_main_process_exited_ends_the_one_running_server(tmp_path):
    """systemd's words (ollama issue 1148's shape, service.c's format) come from PID 1 and name the unit,
    not the PID: they are about the unit's main process, so they end the one server running in the log,
    and no load where two servers run."""
    name = "yuy4o-llm-b7342-docker-a100.log"
    exited = "Dec 05 10:05:00 gpu1 systemd[1]: llama-server.service: Main process exited, code=dumped, status=4/ILL\n"
    one = tmp_path / "one.log"
    one.write_text(_journal_of(name, 4242, []) + exited)
    two = tmp_path / "two.log"
    two.write_text(_journal_of(name, 4242, []) + _journal_of(name, 4343, []) + exited)
    got = {}
    for log in (one, two):
        store = open_store(tmp_path / f"{log.stem}.db")
        try:
            import_path(store, log)
            got[log.stem] = [ld["end_reason"] for ld in load_summaries(store.db)]
        finally:
            store.close()
    assert got["one"] == ["crashed: SIGILL"]
    assert len(got["two"]) == 2 and not any((r or "").startswith("crashed") for r in got["two"]), got


# -- the real server, killed -------------------------------------------------------------

def _start_script(tmp_path: Path) -> Path:
    """A docker image's start script: bash runs the server as its child (AmpereComputingAI's ``/start.sh``)."""
    script = tmp_path / "start.sh"
    script.write_text('#!/bin/bash\nulimit -c 0\n"$@"\n')
    script.chmod(0o755)
    return script


def _start_behind_script(tiny_models, tmp_path: Path, log: Path) -> tuple[subprocess.Popen, str]:
    binary = llamacpp.find_binary()
    port = llamacpp.free_port()
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [str(_start_script(tmp_path)), str(binary), "-m", str(tiny_models["tiny-b"]), "--alias", "tiny-b",
             "--host", "127.0.0.1", "--port", str(port), "-c", "2048", "-t", "2", "--no-webui", "--log-colors", "off"],
            stdout=out, stderr=subprocess.STDOUT, env=llamacpp.server_env(binary), start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    pytest.fail(f"llama-server behind {proc.args[0]} not ready; see {log}")


def _kill_server(proc: subprocess.Popen, sig: int) -> None:
    (server,) = children(proc.pid)  # the script's one child: llama-server itself
    os.kill(server, sig)
    assert proc.wait(timeout=30) == 128 + sig  # what the script reports, as docker would


@pytest.mark.parametrize("sig", ["SIGILL", "SIGSEGV", "SIGBUS", "SIGABRT"])
def test_a_server_killed_by_a_signal_is_a_load_that_crashed_by_it(sig, tiny_models, tmp_path):
    log = tmp_path / "server.log"
    proc, _ = _start_behind_script(tiny_models, tmp_path, log)
    _kill_server(proc, int(getattr(signal, sig)))
    db = tmp_path / "t.db"
    store = open_store(db)
    try:
        import_path(store, log)
        (ld,) = load_summaries(store.db)
        line = store.db.execute("select raw from log_lines where id = ?", [ld["fact_lines"]["crash_signal"]]).fetchone()
    finally:
        store.close()
    meaning = crashes.SIGNALS[sig].meaning
    assert ld["model"] == "tiny-b.gguf" and ld["end_reason"] == f"crashed: {sig}"
    assert ld["exit_status"] == -int(getattr(signal, sig)) and ld["facts"]["crash_signal"] == sig
    assert "start.sh: line 3:" in line[0]  # bash's own words, attributed to the server they are about
    out = CliRunner().invoke(cli, ["loads", "--db", str(db)])
    assert out.exit_code == 0, out.output
    assert f"crashed: {sig} ({meaning})" in out.output


def test_a_server_killed_before_it_was_ready_is_named_by_its_signal(tiny_models, tmp_path):
    class KilledWhileLoading(llamacpp.LlamaServerProcess):
        def wait_ready(self, timeout_s):
            os.kill(self.proc.pid, signal.SIGILL)  # a tiny model needs far more than this to load
            self.proc.wait(timeout=30)
            super().wait_ready(timeout_s)

    server = KilledWhileLoading(["-m", str(tiny_models["tiny-b"]), "--no-webui"], log_path=tmp_path / "s.log")
    with pytest.raises(llamacpp.LlamaServerFailed) as err:
        server.start()
    assert f"llama-server was killed by SIGILL ({SIGILL_MEANING})" in str(err.value)


def _build_article(db: Path, project: Path, run_id: int) -> dict[str, str]:
    from cardproof.report.build import build

    build(db, project, run_mkdocs=False)
    runs = project / "site" / "runs"
    return {"en": (runs / f"run-{run_id}.md").read_text(), "de": (runs / f"run-{run_id}.de.md").read_text()}


def _exceptions(article: str) -> str:
    start = article.index("## Exceptions") if "## Exceptions" in article else article.index("## Ausnahmen")
    return article[start:article.index("\n## ", start + 3)]


def test_a_run_whose_server_dies_by_sigill_reports_it(tiny_models, tmp_path):
    """A single-model server started by a script, killed with SIGILL during a run: the run goes on
    (its requests fail), and its log tells the signal: the CLI, ``cardproof loads`` and the article say it."""
    log = tmp_path / "server.log"
    proc, url = _start_behind_script(tiny_models, tmp_path, log)

    class Dies(LlamaServerBackend):
        asked = 0

        def chat(self, *args, **kwargs):
            Dies.asked += 1
            if Dies.asked == 2:
                _kill_server(proc, signal.SIGILL)
            return super().chat(*args, **kwargs)

    text = campaign_text(url, models=("tiny-b",), reps=3).replace(
        "request_timeout_s = 60", f'request_timeout_s = 60\nlog_file = "{log}"')
    db = tmp_path / "r.db"
    store = open_store(db)
    said: list[str] = []
    try:
        outcome = run_campaign(store, parse_campaign(text, "c.toml"), echo=said.append, backend=Dies(url, timeout_s=30))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        store.close()
    assert (outcome.measured, outcome.failed) == (1, 2)
    died = [s for s in said if "the server process died" in s]
    assert len(died) == 1 and f"crashed: SIGILL ({SIGILL_MEANING})" in died[0] and "Illegal instruction" in died[0]
    out = CliRunner().invoke(cli, ["loads", "--db", str(db)])
    assert f"crashed: SIGILL ({SIGILL_MEANING})" in out.output
    article = _build_article(db, tmp_path / "proj", outcome.run_id)
    en, de = _exceptions(article["en"]), _exceptions(article["de"])
    assert "Server processes that died during this run:" in en and f"crashed: `SIGILL` ({SIGILL_MEANING})" in en
    assert "Illegal instruction" in en  # the script's own line, quoted
    assert "Serverprozesse, die in diesem Lauf abgestürzt sind:" in de and CATALOGUE[SIGILL_MEANING] in de


def test_a_router_child_killed_mid_request_is_reported_live_and_from_the_log(tiny_models, tmp_path):
    """The router reaps its children with sheredom's subprocess.h, which reports any signal as status 1: the
    runner hears of the death from ``/models`` right after the failed request, the log from the router's
    ``exited with status 1`` that nobody asked for; neither can say which signal, and both say so."""
    preset = llamacpp.write_preset(tmp_path / "models.ini", {"tiny-b": tiny_models["tiny-b"]}, ctx_size=4096)
    log = tmp_path / "router.log"
    router = llamacpp.LlamaServerProcess(llamacpp.router_args(preset), log_path=log).start()

    class Dies(LlamaServerBackend):
        asked = 0

        def chat(self, model, prompt, *, max_tokens, reasoning, extra=None, client=None):
            Dies.asked += 1
            if Dies.asked == 2:  # a long answer; its child is killed once it is being computed
                child = router_child_pid(self.url, model)
                started = log.read_text().count("processing task")

                def kill():
                    while log.read_text().count("processing task") == started:
                        time.sleep(0.005)
                    os.kill(child, signal.SIGILL)

                killer = threading.Thread(target=kill)
                killer.start()
                try:
                    return super().chat(model, prompt, max_tokens=3500, reasoning=reasoning,
                                        extra={**(extra or {}), "ignore_eos": True}, client=client)
                finally:
                    killer.join(timeout=60)
            return super().chat(model, prompt, max_tokens=max_tokens, reasoning=reasoning, extra=extra, client=client)

    text = campaign_text(router.url, models=("tiny-b",), reps=3).replace(
        "request_timeout_s = 60", f'request_timeout_s = 60\nlog_file = "{log}"')
    db = tmp_path / "r.db"
    store = open_store(db)
    said: list[str] = []
    try:
        outcome = run_campaign(store, parse_campaign(text, "c.toml"), echo=said.append,
                               backend=Dies(router.url, timeout_s=60))
        rows = store.db.execute("select id, origin, status, end_reason, exit_status, merged_into from loads "
                                "order by id").fetchall()
    finally:
        router.stop()
        store.close()
    assert (outcome.measured, outcome.failed) == (2, 1)
    why = crashes.router_died(1)
    live = next(i for i, s in enumerate(said) if "the server process died" in s)
    assert "rep 2/3: exception" in said[live - 1]  # said right after the request that failed, not at the end
    runner = [r for r in rows if r[1] is None]
    assert runner[0][2:5] == ("loaded", why, 1)  # it had loaded; its process then died
    assert runner[1][3] != why  # the router's next child is a new load, alive to the run's end
    logged = [r for r in rows if r[1] == "log" and r[5] == runner[0][0]]
    assert logged and logged[0][3] == why  # the log, read after the run, says the same of the same load
    out = CliRunner().invoke(cli, ["loads", "--db", str(db), "--run", str(outcome.run_id)])
    assert "crashed: exited unasked with status 1 (the router reports any signal as status 1" in out.output
    en = _exceptions(_build_article(db, tmp_path / "proj", outcome.run_id)["en"])
    assert "Server processes that died during this run:" in en and "exited unasked with status 1" in en
    assert "exited with status 1" in en  # the router's own line, quoted and linked


def test_a_crash_log_page_lists_each_crash_line_in_a_load_or_not(tmp_path):
    from cardproof.report.observed import log_sources, log_view, render_log

    store = open_store(tmp_path / "t.db")
    try:
        import_path(store, REAL / "ollama-issue1603-journal-sigill.log")
        (source,) = log_sources(store.db)
        view = log_view(store.db, source)
    finally:
        store.close()
    (only,) = view["crashes"]
    assert only["signal"] == "SIGILL" and only["load"] is None and "signal: illegal instruction" in only["text"]
    en, de = render_log(view, "en"), render_log(view, "de")
    assert "## Crashes" in en and f"crashed: `SIGILL` ({SIGILL_MEANING})" in en and "(in no load)" in en
    assert f"(#line-{only['line_id']})" in en  # the page prints the line: the link has its anchor
    assert "## Abstürze" in de and CATALOGUE[SIGILL_MEANING] in de and "in keinem Ladevorgang" in de
