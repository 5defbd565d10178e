"""Command modules: each ``cardproof/commands/<name>.py`` defines ``register(cli)``.

cli.py discovers them, so a feature adds its commands without touching cli.py.
"""

from __future__ import annotations

import importlib
import pkgutil


def register_all(cli) -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        module.register(cli)
