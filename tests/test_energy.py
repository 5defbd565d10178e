"""Energy from recorded counters (NVML, amdsmi, RAPL), joules per token, and "not measured" with the reason.

No machine this suite runs on has a readable energy counter (no NVIDIA or AMD card; this VM has no
/sys/class/powercap). The counters are replayed from fixtures in the shapes the sources document
(tests/fixtures/energy/, each naming its source): NVML through the same stand-in of the pynvml module
the memory tests use, amdsmi through a stand-in module answering its documented dicts, RAPL as a real
powercap directory tree whose files are rewritten between readings. The code reading them is the code
that runs on a machine with the counter. Real parts: SQLite, the capture, the report's view and template.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from cardproof.daemon.campaign.model import parse_campaign
from cardproof.daemon.energy import AmdSmiEnergy, EnergyCapture, NvmlEnergy, RaplEnergy
from cardproof.daemon.energy.perf import cell_energy, delta, idle_draw
from cardproof.daemon.memory.recorded import RecordedNvml
from cardproof.daemon.run.runner import run_campaign
from cardproof.daemon.store import open_store
from cardproof.report.build import _env
from cardproof.report.energy import energy_view
from cardproof.report.i18n import CATALOGUE, Lang
from conftest import campaign_text
from memory_support import make_run

FIXTURES = Path(__file__).parent / "fixtures" / "energy"


def _fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


class ReplayedNvml(NvmlEnergy):
    """NVML's energy counter from the recorded ticks: each read shows the next tick."""

    def __init__(self):
        self.recorded = RecordedNvml(_fixture("nvml_two_cards.json"))
        super().__init__(self.recorded, kind="recorded nvml")

    def read(self):
        out = super().read()
        self.recorded.advance()
        return out


class FakeAmdSmi:
    """The amdsmi module's functions cardproof calls, answering the recorded dicts in turn."""

    def __init__(self, answers):
        self.answers, self.turn, self.calls = answers, 0, 0

    def amdsmi_init(self):
        pass

    def amdsmi_shut_down(self):
        pass

    def amdsmi_get_processor_handles(self):
        return [0, 1]

    def amdsmi_get_energy_count(self, handle):
        return self.answers[self.turn][handle]


class ReplayedAmd(AmdSmiEnergy):
    def __init__(self):
        self.fake = FakeAmdSmi(_fixture("amdsmi_two_gpus.json")["answers"])
        super().__init__(self.fake, kind="recorded amdsmi")

    def read(self):
        out = super().read()
        self.fake.turn = min(self.fake.turn + 1, len(self.fake.answers) - 1)
        return out


class ReplayedRapl(RaplEnergy):
    """A powercap tree on disk; each read first writes the next recorded counters into its files."""

    def __init__(self, root: Path):
        self.data = _fixture("rapl_package.json")
        for zone, info in self.data["zones"].items():
            (root / zone).mkdir(parents=True)
            (root / zone / "name").write_text(info["name"] + "\n")
            (root / zone / "max_energy_range_uj").write_text(f"{info['max_energy_range_uj']}\n")
        self.turn = 0
        self._write(root)
        super().__init__(root, kind="recorded rapl")

    def _write(self, root):
        for zone, value in self.data["readings"][self.turn].items():
            (root / zone / "energy_uj").write_text(f"{value}\n")

    def read(self):
        self._write(self.root)
        self.turn = min(self.turn + 1, len(self.data["readings"]) - 1)
        return super().read()


def _clock(*values):
    it = iter(values)
    return lambda: next(it)


def _run_with_a_cell(tmp_path, sources, clock_values):
    """A run, its idle wait and one cell of two samples measured between the cell's two readings."""
    store, run_id, model_id = make_run(tmp_path / "e.db")
    cap = EnergyCapture(store, run_id, sources=sources, clock=_clock(*clock_values), sleep=lambda s: None).start()
    cell_id = store.insert("cells", {"run_id": run_id, "model_id": model_id, "position": 0, "prompt_class": "short",
                                     "reasoning": 0, "max_tokens": 256, "repetitions": 2, "pinned": 1,
                                     "kind": "measure"})
    cap.cell_start(cell_id)
    # two answers: 500 tokens decoded in 8 s and 4,000 prompt tokens processed in 1 s, in all
    for generated, decode_ms, prompt, cached, prefill_ms in ((200, 3000.0, 2500, 500, 500.0),
                                                             (300, 5000.0, 2000, 0, 500.0)):
        store.insert("samples", {"run_id": run_id, "cell_id": cell_id, "repetition": 1, "nonce": "n",
                                 "started_at": "2026-01-01T00:00:00+00:00", "kind": "measure",
                                 "generated_tokens": generated, "predicted_ms": decode_ms, "prompt_tokens": prompt,
                                 "cached_tokens": cached, "prompt_ms": prefill_ms})
    # a failed request holds no timing: it is not counted
    store.insert("samples", {"run_id": run_id, "cell_id": cell_id, "repetition": 3, "nonce": "x",
                             "started_at": "2026-01-01T00:00:00+00:00", "kind": "measure", "error_kind": "http"})
    cap.cell_end(cell_id)
    cap.stop()
    return store, run_id, cell_id


def test_recorded_nvml_counter_gives_joules_per_token(tmp_path):
    source = ReplayedNvml()
    store, run_id, cell_id = _run_with_a_cell(tmp_path, [source], (0.0, 2.0, 5.0, 15.0))
    assert [d for d, _h in source.devices] == ["GPU0"]  # the pre-Volta card reports no energy: left out
    idle = idle_draw(store.db, run_id)["recorded nvml"]
    assert idle["watts"] == pytest.approx(70.0)
    e = cell_energy(store.db, cell_id)["recorded nvml"]
    assert e["joules"] == pytest.approx(3000.0) and e["watts"] == pytest.approx(300.0)
    assert e["generated_tokens"] == 500 and e["prompt_tokens"] == 4000
    assert e["j_per_generated_token"] == pytest.approx(300.0 * 8.0 / 500)  # 4.8 J
    assert e["j_per_prompt_token"] == pytest.approx(300.0 * 1.0 / 4000)  # 0.075 J


def test_recorded_amdsmi_counter_in_both_documented_shapes(tmp_path):
    store, _run_id, cell_id = _run_with_a_cell(tmp_path, [ReplayedAmd()], (0.0, 2.0, 5.0, 15.0))
    e = cell_energy(store.db, cell_id)["recorded amdsmi"]
    # two GPUs of 300 W each: the accumulator key of amdsmi 6.2.1 and later, and "power" before it
    assert e["domains"] == ["GPU0", "GPU1"] and e["watts"] == pytest.approx(600.0, rel=1e-4)


def test_recorded_rapl_counter_wraps_and_counts_the_package_once(tmp_path):
    store, run_id, cell_id = _run_with_a_cell(tmp_path, [ReplayedRapl(tmp_path / "powercap")],
                                              (0.0, 2.0, 5.0, 15.0))
    assert idle_draw(store.db, run_id)["recorded rapl"]["watts"] == pytest.approx(12.0)
    e = cell_energy(store.db, cell_id)["recorded rapl"]
    # package-0 alone: psys holds it and core is inside it; it wrapped between the cell's readings
    assert e["domains"] == ["package-0"] and e["joules"] == pytest.approx(450.0) and e["watts"] == pytest.approx(45.0)
    assert e["j_per_generated_token"] == pytest.approx(45.0 * 8 / 500)


def test_a_counter_that_went_backwards_beyond_its_range_gives_no_figure():
    assert delta(100.0, 50.0, None) is None and delta(100.0, 50.0, 262143.32885) == pytest.approx(262093.32885)
    assert delta(None, 5.0, None) is None and delta(5.0, 7.5, None) == 2.5


def test_not_measured_states_each_sources_reason(tmp_path, monkeypatch):
    store, run_id, _ = make_run(tmp_path / "n.db")
    no_driver = RecordedNvml({"devices": [], "ticks": [{}], "init_error": "DRIVER_NOT_LOADED"})
    powercap = tmp_path / "powercap"
    (powercap / "intel-rapl:0").mkdir(parents=True)
    (powercap / "intel-rapl:0" / "name").write_text("package-0\n")
    (powercap / "intel-rapl:0" / "energy_uj").write_text("1\n")
    real_read = Path.read_text

    def read_text(self, *a, **kw):  # the tests run as root; a kernel with the PLATYPUS fix refuses others
        if self.name == "energy_uj":
            raise PermissionError(13, "Permission denied")
        return real_read(self, *a, **kw)

    monkeypatch.setattr(Path, "read_text", read_text)
    cap = EnergyCapture(store, run_id, sources=[NvmlEnergy(no_driver), AmdSmiEnergy(_missing_amdsmi()),
                                                RaplEnergy(powercap)]).start()
    monkeypatch.undo()
    assert not cap.readable
    line = cap.status_line()
    assert line.startswith("energy: not measured — nvml: no NVIDIA driver") and "root only" in line, line
    view = energy_view(store.db, run_id)
    assert view["status"] == "not_measured" and [r["source"] for r in view["reasons"]] == ["nvml", "amdsmi", "rapl"]
    en = _render(view, "en")
    assert "Energy: not measured" in en and "CPU packages (RAPL)" in en and "CVE-2020-8694" in en
    assert "mean draw" not in en and "Idle draw" not in en  # not one figure in joules or watts
    de = _render(view, "de")
    assert CATALOGUE["Energy: not measured"] in de


def test_this_machine_says_why_it_has_no_counter(tmp_path):
    """The default sources on the machine the suite runs on: each is read, or its reason is stored."""
    store, run_id, _ = make_run(tmp_path / "m.db")
    cap = EnergyCapture(store, run_id, idle_s=0).start()
    readable = {s.kind for s in cap.readable}
    cap.stop()
    reasons = dict(store.db.execute("select source, reason from energy_readings where phase = 'unavailable'"))
    assert set(reasons) | readable == {"nvml", "amdsmi", "rapl"} and not set(reasons) & readable
    assert all(reason and reason.strip() for reason in reasons.values()), reasons


def test_the_section_shows_the_cell_per_token_and_the_idle_draw(tmp_path):
    store, run_id, cell_id = _run_with_a_cell(tmp_path, [ReplayedNvml(), ReplayedRapl(tmp_path / "powercap")],
                                              (0.0, 0.0, 2.0, 2.0, 5.0, 5.0, 15.0, 15.0))
    view = energy_view(store.db, run_id)
    assert view["status"] == "measured" and view["recorded"]
    assert {r["source"]: round(r["watts"], 1) for r in view["idle"]} == {"recorded nvml": 70.0, "recorded rapl": 12.0}
    en = _render(view, "en")
    assert "Recorded readings" in en
    assert "**Idle draw before the run:** card (NVML) 70.0 W; CPU packages (RAPL) 12.0 W" in en
    assert f"(#cell-{cell_id}) | card (NVML) | 3,000.0 | 300.0 | 4.800 | 0.0750 |" in en, en
    assert f"(#cell-{cell_id}) | CPU packages (RAPL) | 450.0 | 45.0 | 0.720 | 0.0112 |" in en, en
    de = _render(view, "de")
    assert "| 3.000,0 | 300,0 | 4,800 | 0,0750 |" in de and CATALOGUE["Idle draw before the run"] in de


def test_a_run_stored_before_energy_has_no_section(tmp_path):
    store, run_id, _ = make_run(tmp_path / "o.db")
    assert energy_view(store.db, run_id)["status"] == "not_captured"
    store.db.execute("drop table energy_readings")
    assert energy_view(store.db, run_id) == {"status": "not_captured"}
    assert "## Energy" not in _render({"status": "not_captured"}, "en")


def _missing_amdsmi():
    """An amdsmi whose native library is not there: its init raises, as the binding does without ROCm."""
    def init():
        raise OSError("libamd_smi.so: cannot open shared object file")
    return SimpleNamespace(amdsmi_init=init)


def _render(view: dict, lang: str) -> str:
    L = Lang(lang)
    return _env().get_template("sections/energy.md.j2").render(_=L.gettext, L=L, energy=view)


class RunningRapl(RaplEnergy):
    """A package zone whose counter runs at 20 W on the monotonic clock, written before each read."""

    def __init__(self, root: Path):
        zone = root / "intel-rapl:0"
        zone.mkdir(parents=True)
        (zone / "name").write_text("package-0\n")
        (zone / "max_energy_range_uj").write_text("262143328850\n")
        super().__init__(root, kind="recorded rapl")
        self._tick()

    def _tick(self):
        (self.root / "intel-rapl:0" / "energy_uj").write_text(f"{int(time.monotonic() * 20e6)}\n")

    def read(self):
        self._tick()
        return super().read()


def test_a_real_run_reads_the_counter_around_every_cell(llama_server, tmp_path):
    """The runner's phases: the idle wait before the first cell, then a start and an end reading per cell."""
    store = open_store(tmp_path / "run.db")
    campaign = parse_campaign(campaign_text(llama_server.url, classes=("short", "medium"), reps=1), "c.toml")
    out = run_campaign(store, campaign, echo=lambda _: None, energy_sources=[RunningRapl(tmp_path / "powercap")])
    cells = [r[0] for r in store.db.execute("select id from cells where run_id = ? and kind = 'measure'",
                                            [out.run_id])]
    phases = store.db.execute("select phase, count(*) from energy_readings where run_id = ? group by phase",
                              [out.run_id]).fetchall()
    assert dict(phases) == {"idle_start": 1, "idle_end": 1, "cell_start": len(cells), "cell_end": len(cells)}
    assert idle_draw(store.db, out.run_id)["recorded rapl"]["watts"] == pytest.approx(20.0, rel=0.05)
    for cell_id in cells:
        e = cell_energy(store.db, cell_id)["recorded rapl"]
        assert e["watts"] == pytest.approx(20.0, rel=0.05) and e["j_per_generated_token"] > 0, e
    store.close()
