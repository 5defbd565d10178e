"""Compiled theme templates are kept in the user's own cache folder, and only where no one else can write.

Jinja loads code from that folder (``report/site_build.py`` ``compile_templates_once``), so a folder
another user owns, or one others may write to, must never be used. Real parts: the folder on this
machine's file system and a real ``mkdocs build`` of a real project.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cardproof.report import site_build
from cardproof.report.site import scaffold


def test_the_cache_is_the_users_own_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = site_build._template_cache()
    assert folder == tmp_path / "cache" / "cardproof" / "jinja"
    assert folder.is_dir() and folder.stat().st_mode & 0o777 == 0o700


def test_a_folder_others_may_write_to_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = tmp_path / "cache" / "cardproof" / "jinja"
    folder.mkdir(parents=True)
    folder.chmod(0o777)
    assert site_build._template_cache() is None
    folder.chmod(0o700)
    assert site_build._template_cache() == folder


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a folder away needs root")
def test_a_folder_of_another_user_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = tmp_path / "cache" / "cardproof" / "jinja"
    folder.mkdir(parents=True, mode=0o700)
    os.chown(folder, 65534, 65534)
    assert site_build._template_cache() is None


def test_a_build_leaves_the_compiled_templates_and_the_next_build_reads_them(tmp_path):
    project = tmp_path / "proj"
    scaffold(project)
    for name in ("index.md", "index.de.md"):  # the home page links the runs' index
        (project / "site" / "runs").mkdir(exist_ok=True)
        (project / "site" / "runs" / name).write_text("# Runs\n")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    cache = tmp_path / "cache" / "cardproof" / "jinja"

    def build() -> None:
        proc = subprocess.run([sys.executable, "-m", "cardproof.report.site_build", str(project), "--full"],
                              cwd=project, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]

    build()
    made = {p.name: p.stat().st_mtime_ns for p in cache.iterdir()}
    assert len(made) > 20  # Material's templates, each compiled once
    build()
    assert {p.name: p.stat().st_mtime_ns for p in cache.iterdir()} == made  # read, not compiled again
    assert (project / "build" / "site" / "index.html").is_file()


def test_a_cache_that_cannot_be_written_or_read_only_costs_the_compiling(tmp_path, monkeypatch):
    """A full disk (no compiled template can be kept) or a cut file leaves the build as it is without a cache."""
    import tempfile

    from mkdocs import theme as mk_theme

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(mk_theme.Theme, "get_env", mk_theme.Theme.get_env)  # the wrapper goes after the test
    site_build.compile_templates_once()
    folder = tmp_path / "cache" / "cardproof" / "jinja"

    def no_space(*args, **kwargs):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(tempfile, "NamedTemporaryFile", no_space)
        assert mk_theme.Theme(name="material").get_env().get_template("main.html")  # compiled, not kept
    assert list(folder.iterdir()) == []
    mk_theme.Theme(name="material").get_env().get_template("main.html")
    kept = list(folder.iterdir())
    assert kept
    for f in kept:  # the header whole, the code cut short: marshal cannot read it
        data = f.read_bytes()
        f.write_bytes(data[:data.index(b"\n") + 10])
    assert mk_theme.Theme(name="material").get_env().get_template("main.html")  # compiled again
