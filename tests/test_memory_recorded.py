"""Recorded-reading tests: the real NVML code path fed from recorded answers.

No NVIDIA GPU exists here. ``RecordedSource`` hands ``NvmlSource`` a
stand-in for pynvml whose answers come from tests/fixtures/nvml/*.json
(values from the seeds and NVIDIA's NVML reference, cited in the fixtures).
"""

from __future__ import annotations

import pytest

from cardproof.daemon.memory import NvmlSource, RecordedSource, SourceUnavailable
from cardproof.daemon.memory.procinfo import ProcResolver, listening_pids, server_pids
from memory_support import FIXTURES, StandIn, free_port


@pytest.fixture
def devdir(tmp_path):
    d = tmp_path / "dev"
    d.mkdir()
    return d


@pytest.fixture
def seed_procs(devdir):
    """Server, neighbour and desktop stand-ins, each holding a fake device file."""
    server = StandIn(devdir / "nvidia0", port=free_port())
    neighbour = StandIn(devdir / "nvidia1")
    desktop = StandIn(devdir / "nvidia2")
    yield {"SERVER": server.pid, "NEIGHBOUR": neighbour.pid, "DESKTOP": desktop.pid, "_server": server}
    for p in (server, neighbour, desktop):
        p.stop()


def seed_source(devdir, pids):
    return RecordedSource(FIXTURES / "seed_two_3090.json", device_prefixes=[str(devdir)],
                          pids={k: v for k, v in pids.items() if not k.startswith("_")})


def test_recorded_reading_devices_and_pcie(devdir, seed_procs):
    src = seed_source(devdir, seed_procs).open()
    r = src.read()
    assert r.source == "recorded"
    assert [d.total_mib for d in r.devices] == [24576.0, 24576.0]
    d0, d1 = r.devices
    assert d0.name == "NVIDIA GeForce RTX 3090"
    # seed 003: the second card runs on eight lanes instead of sixteen
    assert (d0.pcie_gen_current, d0.pcie_width_current, d0.pcie_width_max) == (3, 16, 16)
    assert (d1.pcie_width_current, d1.pcie_width_max) == (8, 16)
    assert d0.free_mib == pytest.approx(d0.total_mib - d0.used_mib)


def test_recorded_reading_per_process_memory_and_names(devdir, seed_procs):
    src = seed_source(devdir, seed_procs).open()
    for _ in range(4):
        r = src.read()  # tick 3: the steady state of the seed's production model
    server = seed_procs["SERVER"]
    rows = r.processes_of([server])
    assert sorted(p.used_mib for p in rows) == [16326.0, 16846.0]
    assert r.used_by([server]) == 33172.0  # 32.39 GiB, as seed 003 measured with nvidia-smi
    assert all(p.pid_status == "local" and p.name.startswith("python") for p in rows)
    desktop = [p for p in r.processes if p.pid == seed_procs["DESKTOP"]]
    assert desktop[0].kind == "graphics"


def test_recorded_reading_host_pids_are_detected_not_guessed(devdir):
    """A container without --pid=host: the driver's PIDs are not ours."""
    lookalike = StandIn(None)  # a live local process that holds no GPU device file
    wddm = StandIn(devdir / "nvidia0")
    try:
        src = RecordedSource(FIXTURES / "container_host_pids.json", device_prefixes=[str(devdir)],
                             pids={"LOOKALIKE": lookalike.pid, "WDDM": wddm.pid}).open()
        r = src.read()
    finally:
        lookalike.stop()
        wddm.stop()
    by_pid = {p.pid: p for p in r.processes}
    host = by_pid[4194400]
    assert host.pid_status == "foreign" and host.name is None and not host.attributable
    assert "PID namespace" in host.reason
    look = by_pid[lookalike.pid]
    assert look.pid_status == "mismatch" and look.name is None
    # matching by number would have credited the lookalike with 1161 MiB
    assert r.used_by([lookalike.pid, 4194400]) == 0
    # NVML_VALUE_NOT_AVAILABLE (pynvml: None) stays unknown, it does not become 0
    assert by_pid[wddm.pid].used_mib is None
    assert r.used_by([wddm.pid]) is None


def test_recorded_reading_old_driver_falls_back_from_v3(devdir):
    """The fixture's driver lacks the _v3 calls and PCIe generation: _v2 is used, PCIe gen is None."""
    other = StandIn(None)
    try:
        src = RecordedSource(FIXTURES / "container_host_pids.json", device_prefixes=[str(devdir)],
                             pids={"LOOKALIKE": other.pid, "WDDM": other.pid}).open()
        with pytest.raises(Exception, match="Function Not Found"):
            src.recorded.nvmlDeviceGetComputeRunningProcesses_v3(0)
        r = src.read()
    finally:
        other.stop()
    assert len(r.processes) >= 2
    assert r.devices[0].pcie_gen_current is None and r.devices[0].pcie_gen_max == 3


def test_recorded_reading_no_driver_raises_unavailable():
    src = RecordedSource(FIXTURES / "no_driver.json")
    with pytest.raises(SourceUnavailable, match="NVMLError_LibraryNotFound"):
        src.open()


def test_real_nvml_on_this_machine_is_unavailable_with_the_drivers_reason():
    """No NVIDIA driver here: the real source says so (a GPU box skips this)."""
    src = NvmlSource()
    try:
        src.open()
    except SourceUnavailable as exc:
        assert "NVML" in str(exc) or "nvidia" in str(exc).lower()
        assert src.unavailable_reason == str(exc)
    else:  # pragma: no cover - only on a machine with a driver
        src.close()
        pytest.skip("an NVIDIA driver is present; scripts/gpu_check.py tests the real path")


def test_port_resolves_to_the_listening_process_only(devdir):
    port = free_port()
    server = StandIn(devdir / "nvidia0", port=port)
    bystander = StandIn(devdir / "nvidia1")
    try:
        assert listening_pids(port) == [server.pid]
        pids, how = server_pids(port=port, pid=bystander.pid)
        assert (pids, how) == ([server.pid], "port")  # the port wins over a router-wide PID
        assert server_pids(port=free_port(), pid=bystander.pid) == ([bystander.pid], "pid")
    finally:
        server.stop()
        bystander.stop()


def test_resolver_reports_a_vanished_pid_as_foreign(devdir):
    p = StandIn(devdir / "nvidia0")
    pid = p.pid
    res = ProcResolver(device_prefixes=[str(devdir)], ttl_s=0)
    assert res.describe(pid)[1] == "local"
    p.stop()
    assert res.describe(pid)[1] == "foreign"


def test_ollama_runner_is_found_by_its_model_blob_not_by_its_parent(devdir):
    blob = devdir / "sha256-22130167c4c2"
    blob.write_text("")
    runner = StandIn(devdir / "nvidia0", extra_args=["--model", str(blob), "--port", "0"])
    other = StandIn(devdir / "nvidia1", extra_args=["--model", str(devdir / "sha256-ffff")])
    try:
        assert server_pids(arg="sha256-22130167c4c2") == ([runner.pid], "arg")
        assert server_pids(arg="22130167c4c2") == ([], "none")  # a fragment is not a blob
    finally:
        runner.stop()
        other.stop()
