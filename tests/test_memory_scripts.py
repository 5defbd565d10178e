"""The GPU check script and the sampler benchmark run here (recorded source, no card)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*args, timeout=120):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def _driver_present() -> bool:
    """Whether NVML answers on this machine, asked directly rather than through the script under test."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 -- no library, no driver, no device: all mean no driver here
        return False
    pynvml.nvmlShutdown()
    return True


def test_gpu_check_passes_on_a_driver_and_skips_with_exit_2_without_one():
    res = run("scripts/gpu_check.py", timeout=600)
    if _driver_present():
        # a GPU box runs the real check: every check must pass (a FAIL is this test failing)
        assert res.returncode == 0, res.stdout + res.stderr
        assert res.stdout.rstrip().endswith("PASS") and "FAIL" not in res.stdout, res.stdout
    else:
        assert res.returncode == 2, res.stdout + res.stderr
        assert "SKIP" in res.stdout and "no NVIDIA driver" in res.stdout, res.stdout


@pytest.fixture(scope="module")
def selftest_ok():
    """One passing run of the recorded self-test: the memory and the energy checks read its lines."""
    return run("scripts/gpu_check.py", "--recorded-selftest", "--mib", "256")


def test_recorded_reading_gpu_check_selftest_passes_and_can_fail(selftest_ok):
    ok = selftest_ok
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.rstrip().endswith("PASS") and "+256.0 MiB" in ok.stdout
    bad = run("scripts/gpu_check.py", "--recorded-selftest", "--mib", "256", "--selftest-skew-mib", "40")
    assert bad.returncode == 1 and "FAIL allocation of 256 MiB" in bad.stdout


def test_recorded_reading_gpu_check_selftest_covers_energy_and_can_fail(selftest_ok):
    """The energy checks: the counter opens, the idle draw lies within the card's power limit, a cell's
    joules are stored from its two readings; a draw beyond the limit fails."""
    ok = selftest_ok
    assert ok.returncode == 0, ok.stdout + ok.stderr
    idle = next(ln for ln in ok.stdout.splitlines() if "idle draw from the energy counter" in ln)
    assert idle.startswith("PASS") and "(power limit 700.0 W)" in idle, idle
    watts = float(idle.split("over 2 s: ")[1].split(" W")[0])
    assert 60 < watts < 80, idle  # the recorded counter runs at 70 W
    assert any(ln.startswith("PASS energy over the allocation") for ln in ok.stdout.splitlines()), ok.stdout
    bad = run("scripts/gpu_check.py", "--recorded-selftest", "--mib", "64", "--selftest-watts", "900")
    assert bad.returncode == 1 and "FAIL idle draw from the energy counter" in bad.stdout, bad.stdout


def test_recorded_reading_sampler_benchmark_prints_cpu_per_hour():
    res = run("bench/nvml_sampler.py", "--seconds", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 Hz" in res.stdout and "10 Hz" in res.stdout and "CPU s/h" in res.stdout
