"""The server process's own memory on the host (daemon/memory/host.py): read, stored per cell, shown.

Real parts: a live child process that holds a known amount of anonymous memory and a memory-mapped
file it has read (so /proc and psutil see real pages, split as the kernel splits them), real SQLite,
the real capture path (MemoryCapture without an NVIDIA driver, as on this machine) and the real
memory section template in both languages.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cardproof.daemon.memory import MemoryCapture, NvmlSource, RecordedSource
from cardproof.daemon.memory.host import GIVEN_BY_NONE, load_summary, read_process, summarise
from cardproof.daemon.store import utcnow
from cardproof.report.build import _env
from cardproof.report.i18n import CATALOGUE, Lang
from cardproof.report.memory import memory_view
from memory_support import FIXTURES, add_load, make_run

# holds ANON MiB of written (so resident) anonymous memory and FILE MiB of a mapped file it has read;
# "grow" doubles the anonymous part, "quit" ends it
_HOLDER = r"""
import mmap, sys
anon_mib, path = int(sys.argv[1]), sys.argv[2]
keep = [b"\x01" * (anon_mib << 20)]
f = open(path, "rb"); mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
total = sum(mm[i] for i in range(0, len(mm), 4096))
print("ready", flush=True)
for line in sys.stdin:
    if line.strip() == "grow":
        keep.append(b"\x02" * (anon_mib << 20)); print("grown", flush=True)
    else:
        break
"""


class Holder:
    def __init__(self, tmp: Path, anon_mib: int, file_mib: int):
        self.file = tmp / "weights.bin"
        self.file.write_bytes(b"\x07" * (file_mib << 20))
        self.proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(anon_mib), str(self.file)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"
        self.pid = self.proc.pid

    def grow(self):
        self.proc.stdin.write("grow\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "grown"

    def stop(self):
        self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def holder(tmp_path):
    h = Holder(tmp_path, anon_mib=48, file_mib=64)
    yield h
    h.stop()


def _no_driver_source():
    try:
        NvmlSource().open().close()
    except Exception:  # noqa: BLE001 -- no library, no driver: the machine this suite is built on
        return NvmlSource()
    return RecordedSource(FIXTURES / "no_driver.json")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the anonymous/file-backed split is Linux's")
def test_a_process_is_read_as_the_kernel_splits_it(holder):
    mem = read_process(holder.pid)
    assert mem.anon_mib >= 48 and mem.anon_mib < 48 + 40, mem
    assert mem.file_mib >= 64, mem  # the mapped file's pages it read, plus its binary and libraries
    assert mem.rss_mib == pytest.approx(mem.anon_mib + mem.file_mib + mem.shmem_mib, abs=1.0)
    # PSS and USS need smaps_rollup, which a process of the same user may read
    assert mem.uss_mib is not None and mem.pss_mib is not None and mem.uss_mib <= mem.pss_mib <= mem.rss_mib
    assert mem.hwm_mib >= mem.rss_mib - 1 and mem.reason is None
    assert read_process(2**22 + 12345) is None  # no such process: nothing, not a zero


def test_cells_store_the_peak_and_the_section_shows_it_beside_the_self_report(holder, tmp_path):
    store, run_id, model_id = make_run(tmp_path / "m.db")
    cap = MemoryCapture(store, run_id, source=_no_driver_source(), interval_s=0.05).start()
    try:
        load_id = add_load(store, run_id, model_id, pid=holder.pid)
        cap.after_load(load_id, pid=holder.pid)
        cells = []
        for grow in (False, True):
            cell_id = store.insert("cells", {"run_id": run_id, "model_id": model_id, "position": len(cells),
                                             "prompt_class": "short", "reasoning": 0, "max_tokens": 8,
                                             "repetitions": 1, "pinned": 1, "kind": "measure"})
            cap.start_cell(cell_id, load_id)
            if grow:
                holder.grow()
            cap.end_cell(cell_id, load_id)
            cells.append(cell_id)
    finally:
        cap.stop()
    rows = {r["cell_id"]: r for r in store.db.query("select * from host_memory_cells where load_id = ?", [load_id])}
    assert set(rows) == set(cells) and all(r["status"] == "ok" and r["n_samples"] >= 2 for r in rows.values())
    first, second = rows[cells[0]], rows[cells[1]]
    # the second cell's peak holds the 48 MiB the process wrote during it: measured, per cell
    assert second["peak_rss_mib"] - first["peak_rss_mib"] == pytest.approx(48, abs=6), (first, second)
    if sys.platform.startswith("linux"):
        assert second["anon_mib"] - first["anon_mib"] == pytest.approx(48, abs=6)
        assert second["file_mib"] == pytest.approx(first["file_mib"], abs=2)  # the mapped file did not grow
    store.insert("memory_selfreports", {"run_id": run_id, "load_id": load_id, "ts": utcnow(), "kind": "exit",
                                        "source": "llama-server memory breakdown", "total_mib": 294.0,
                                        "gpu_mib": 0.0, "items_json": "{}", "line_ids_json": "[]"})
    view = memory_view(store.db, run_id)
    process = view["loads"][0]["process"]
    assert view["any_process"] and process["peak_rss_mib"] == max(r["peak_rss_mib"] for r in rows.values())
    assert process["pids"] == [holder.pid]
    en = _render(view, "en")
    part = en[en.index("### Server process memory"):en.index("### Memory on the card")]
    row = next(ln for ln in part.splitlines() if ln.startswith(f"| qwen3.8:27b · load {load_id} |"))
    assert f"**{process['peak_rss_mib']:,.0f}**" in row and "| 294 |" in row, row
    assert f"psutil, PID {holder.pid}" in row and "self-report: llama-server memory breakdown" in row, row
    assert f"(#cell-{cells[1]})" in part and "file-backed" in part
    # the load's headline peak is whole-life; the section says so where per-cell figures stand beside it
    assert "peak spans all it served" in part and "prompt cache" in part
    de = _render(view, "de")
    assert CATALOGUE["Server process memory"] in de and CATALOGUE["file-backed"] in de


def test_no_process_read_says_why_and_states_no_figure(tmp_path):
    store, run_id, model_id = make_run(tmp_path / "m.db")
    add_load(store, run_id, model_id)  # no PID, no port: nothing identified
    view = memory_view(store.db, run_id)
    assert not view["any_process"] and view["loads"][0]["process"].get("peak_rss_mib") is None
    en = _render(view, "en")
    assert "was not read on this host" in en and "was not identified on this host" in en
    assert "**0**" not in en


def test_a_sum_over_processes_with_a_missing_figure_is_no_figure():
    """Two processes of one load, one of whose PSS the OS withheld: RSS is summed, PSS is not stated."""
    series = [{"ts": "t1", "rss_mib": 300.0, "uss_mib": None, "pss_mib": None, "anon_mib": 200.0,
               "file_mib": 100.0, "shmem_mib": 0.0, "swap_mib": 0.0, "hwm_mib": 310.0,
               "reason": GIVEN_BY_NONE["pss"]},
              {"ts": "t2", "rss_mib": 320.0, "uss_mib": None, "pss_mib": None, "anon_mib": 210.0,
               "file_mib": 110.0, "shmem_mib": 0.0, "swap_mib": 0.0, "hwm_mib": 320.0, "reason": None}]
    s = summarise(series)
    assert s["peak_rss_mib"] == 320.0 and s["peak_pss_mib"] is None and s["anon_mib"] == 210.0
    assert s["median_rss_mib"] == 310.0 and summarise([]) is None


def test_a_store_without_the_table_has_no_host_figure(tmp_path):
    store, run_id, model_id = make_run(tmp_path / "m.db")
    load_id = add_load(store, run_id, model_id)
    store.db.execute("drop table host_memory_samples")
    assert load_summary(store.db, load_id) is None


def _render(view: dict, lang: str) -> str:
    L = Lang(lang)
    return _env().get_template("sections/memory.md.j2").render(_=L.gettext, L=L, memory=view, run={})


def test_apple_metal_buffers_are_stated_as_unified_memory(tmp_path):
    """The Apple M4 load of tests/fixtures/logs/real/llama-runner-metal-2026.log (real): its MTL0 buffers and
    Metal's recommended working set are named as unified memory in the process's own memory, never a card."""
    from cardproof.daemon.logs import import_path
    from cardproof.daemon.memory.reconcile import items_from_facts, load_facts

    store, run_id, model_id = make_run(tmp_path / "metal.db", model="gemma-4-E4B-it-Q8_0")
    import_path(store, Path(__file__).parent / "fixtures" / "logs" / "real" / "llama-runner-metal-2026.log",
                run_id=run_id)
    # the runner's own load, as one whose lines the log import attributed to it
    store.db.execute("update loads set run_id = ?, model_id = ?, origin = null, trigger = 'explicit'",
                     [run_id, model_id])
    store.db.conn.commit()
    view = memory_view(store.db, run_id)
    (row,) = view["loads"]
    unified = row["unified"]
    # MTL0_Mapped weights 7,798.32 + KV 1,024 + SWA KV 40 + compute 517.5 + projector compute 101.27 MiB
    assert unified["buffers_mib"] == pytest.approx(7798.32 + 1024 + 40 + 517.5 + 101.27, abs=0.01)
    assert unified["working_set_mib"] == pytest.approx(12713.12e6 / 2**20, abs=0.01)
    assert items_from_facts(load_facts(store.db, row["load_id"]))[0] == []  # not one item on a card
    en = _render(view, "en")
    assert "unified memory (Apple Metal)" in en and "not on a card" in en and "12,124 MiB" in en
    de = _render(view, "de")
    assert "gemeinsamer Speicher (Apple Metal)" in de


def test_a_load_without_readings_beside_one_with_them_says_why_in_its_row(holder, tmp_path):
    store, run_id, model_id = make_run(tmp_path / "two.db")
    cap = MemoryCapture(store, run_id, source=_no_driver_source(), interval_s=0.05).start()
    try:
        read = add_load(store, run_id, model_id, pid=holder.pid)
        cap.after_load(read, pid=holder.pid)
    finally:
        cap.stop()
    unread = add_load(store, run_id, model_id)  # no PID, no port: nothing to read
    view = memory_view(store.db, run_id)
    assert view["any_process"]
    en = _render(view, "en")
    row = next(ln for ln in en.splitlines() if ln.startswith(f"| qwen3.8:27b · load {unread} |"))
    assert "not measured" in row and "was not identified on this host" in row, row
