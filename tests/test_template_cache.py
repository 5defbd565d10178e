"""Compiled templates are kept between report processes, per code fingerprint, and a cache that cannot
be written is no cache rather than a failed build (report/render.py ``_bytecode_cache``)."""

from __future__ import annotations

import os
import subprocess
import sys

_RENDER = """
import shutil, sys, time
from pathlib import Path
from cardproof.report import render
env = render.environment()
if "--unwritable" in sys.argv:
    # the cache's folder turns into a file under it: no one, root included, can write a file inside
    folder = Path(env.bytecode_cache.directory)
    shutil.rmtree(folder)
    folder.write_text("a file where the folder was")
t = time.perf_counter()
for name in ("run.md.j2", "home.md.j2", "trend.md.j2", "runs_index.md.j2"):
    env.get_template(name)
print(type(env.bytecode_cache).__name__, f"{time.perf_counter() - t:.3f}")
"""


def _render(home, *args: str) -> list[str]:
    env = dict(os.environ, CARDPROOF_HOME=str(home))
    out = subprocess.run([sys.executable, "-c", _RENDER, *args], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_a_second_process_reads_the_compiled_templates(tmp_path):
    kind, _ = _render(tmp_path / "home")
    assert kind == "_TemplateCache"
    folders = list((tmp_path / "home" / "cache").glob("templates-*"))
    assert len(folders) == 1 and oct(folders[0].stat().st_mode & 0o777) == "0o700"
    cached = sorted(p.name for p in folders[0].iterdir())
    # run.md.j2 includes its sections: each template compiled once is one file
    assert len(cached) >= 4 and not [n for n in cached if n.endswith(".tmp")]
    before = {p: p.stat().st_mtime_ns for p in folders[0].iterdir()}
    _render(tmp_path / "home")
    # read, not written again
    assert {p: p.stat().st_mtime_ns for p in folders[0].iterdir()} == before


def test_a_folder_of_other_code_unused_for_a_week_is_removed(tmp_path):
    root = tmp_path / "home" / "cache"
    old, recent = root / "templates-0000000000000000", root / "templates-1111111111111111"
    for d in (old, recent):
        d.mkdir(parents=True)
        (d / "x.cache").write_bytes(b"stale")
    week = 8 * 86400
    os.utime(old, (old.stat().st_atime - week, old.stat().st_mtime - week))
    _render(tmp_path / "home")
    assert not old.exists() and recent.exists()


def test_a_cache_that_cannot_be_made_is_no_cache(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "cache").write_text("a file where the folder would be")
    kind, _ = _render(home)
    assert kind == "NoneType"


def test_a_cache_folder_that_cannot_be_written_still_renders(tmp_path):
    """Writing a compiled template fails (here: its folder became a file, which stops root as well as
    anyone else, where a read-only folder would not stop root): the templates render all the same."""
    home = tmp_path / "home"
    kind, _ = _render(home, "--unwritable")
    assert kind == "_TemplateCache"  # the cache was made, then could not be written
    [folder] = (home / "cache").glob("templates-*")
    assert folder.is_file()  # the write really failed: nothing was put in its place
