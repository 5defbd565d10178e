"""Debian's headless Chromium for the site tests: one binary, one set of flags, one launch.

The flags keep Chromium off the network it would otherwise try at start
(background networking, component updates, sync, QUIC), so a test's "no
request off localhost" check sees only the page's own requests.
"""

from __future__ import annotations

import shutil

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]

needs_chromium = pytest.mark.skipif(not shutil.which("chromium"),
                                    reason="Debian chromium not installed (.ci/run installs it)")


def launch(playwright):
    """Chromium through Playwright, with the flags above."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)


@pytest.fixture(scope="module")
def browser():
    """One browser per test module."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch(p)
        yield b
        b.close()
