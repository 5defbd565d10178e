"""AMD cards read through AMD SMI (daemon/memory/amdsmi.py): per-process VRAM into the same attribution.

No AMD GPU (and no amdsmi) exists on the machines this suite runs on: a stand-in of the ``amdsmi``
module answers in the documented shapes recorded in tests/fixtures/amdsmi/ (its ``_source`` names
them); both the dict form of the process list and the older handle form are exercised. The reading
then goes through the real sampler, attribution and store, with a live stand-in process that holds a
file the way a ROCm process holds /dev/kfd.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cardproof.daemon.memory import MemoryCapture
from cardproof.daemon.memory.amdsmi import AmdSmiSource
from cardproof.daemon.memory.attribution import load_memory
from cardproof.daemon.memory.procinfo import ProcResolver
from cardproof.daemon.memory.readings import SourceUnavailable
from memory_support import StandIn, add_load, make_run

FIXTURE = Path(__file__).parent / "fixtures" / "amdsmi" / "radeon_780m.json"


class FakeAmdSmi:
    """The amdsmi functions AmdSmiSource calls, answering the recorded dicts (``handles``: the older list form)."""

    def __init__(self, pids: dict[str, int], *, handles: bool = False):
        data = json.loads(FIXTURE.read_text())
        self.devices = data["devices"]
        self.procs = [{**p, "pid": pids.get(p["pid"], p["pid"])} for p in data["processes"]]
        self.handles = handles

    def amdsmi_init(self):
        pass

    def amdsmi_shut_down(self):
        pass

    def amdsmi_get_processor_handles(self):
        return list(range(len(self.devices)))

    def amdsmi_get_gpu_vram_usage(self, h):
        return dict(self.devices[h]["vram"])

    def amdsmi_get_gpu_asic_info(self, h):
        return dict(self.devices[h]["asic"])

    def amdsmi_get_gpu_device_uuid(self, h):
        return self.devices[h]["uuid"]

    def amdsmi_get_gpu_process_list(self, h):
        return list(range(len(self.procs))) if self.handles else [dict(p) for p in self.procs]

    def amdsmi_get_gpu_process_info(self, h, proc):
        return dict(self.procs[proc])


@pytest.fixture
def server(tmp_path):
    kfd = tmp_path / "kfd"
    s = StandIn(kfd)
    yield s, kfd
    s.stop()


@pytest.mark.parametrize("handles", [False, True], ids=["dicts", "handles"])
def test_recorded_reading_amdsmi_process_vram_is_attributed_to_the_load(server, tmp_path, handles):
    standin, kfd = server
    src = AmdSmiSource(FakeAmdSmi({"$SERVER": standin.pid}, handles=handles),
                       resolver=ProcResolver(device_prefixes=[str(kfd)], ttl_s=0))
    reading = src.read()
    (device,) = reading.devices
    assert (device.name, device.total_mib, device.used_mib, device.free_mib) == ("AMD Radeon 780M", 512.0, 498.0, 14.0)
    mine = reading.processes_of([standin.pid])
    assert [p.used_mib for p in mine] == [384.0]  # vram_mem in bytes, in MiB
    assert "GTT (system memory the GPU maps) 4200.0 MiB" in mine[0].reason  # named, not counted as card memory
    other = next(p for p in reading.processes if p.pid == 4194300)
    assert other.pid_status == "foreign" and not other.attributable

    store, run_id, model_id = make_run(tmp_path / "a.db")
    cap = MemoryCapture(store, run_id, source=src, interval_s=0.05, settle_poll_s=0.01).start()
    try:
        load_id = add_load(store, run_id, model_id, pid=standin.pid)
        row = cap.after_load(load_id, pid=standin.pid)
    finally:
        cap.stop()
    assert row["status"] == "steady" and row["total_mib"] == 384.0
    assert load_memory(store.db, load_id)["card_mib"] == 384.0
    assert store.db.execute("select distinct source from memory_samples").fetchall() == [("amdsmi",)]


def test_without_amdsmi_the_reason_is_stated():
    def missing():
        raise OSError("libamd_smi.so: cannot open shared object file")

    class NoLibrary:
        amdsmi_init = staticmethod(missing)

    with pytest.raises(SourceUnavailable, match="amdsmi found no AMD GPU"):
        AmdSmiSource(NoLibrary()).open()
