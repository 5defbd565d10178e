"""Registries built from the modules of a package: one module, one entry.

Every plug-in of cardproof is found this way (cardproof/extensions.py lists
the points), so adding one is adding its module; nothing else lists it.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Iterable, Iterator


def modules(package: str, path: Iterable[str], skip: set[str]) -> Iterator[tuple[str, object]]:
    """``(name, module)`` of every module in ``package`` but ``skip`` and private ones, by name."""
    for info in sorted(pkgutil.iter_modules(path), key=lambda i: i.name):
        if info.name not in skip and not info.name.startswith("_"):
            yield info.name, importlib.import_module(f"{package}.{info.name}")


#: package -> (attribute, kind) of every ``declared`` registry built so far (cardproof/extensions.py lists them)
BUILT: dict[str, tuple[str, type]] = {}


def declared(package: str, path: Iterable[str], skip: set[str], attribute: str, kind: type, *,
             key: str = "name") -> dict:
    """``key -> entry`` from each module's ``attribute`` (a ``kind``, or a subclass of it), in ``order``.

    A module without one, or two entries under one key, stop the import with
    the file named: a registry that silently lacks an entry is worse.
    """
    BUILT[package] = (attribute, kind)
    found: dict = {}
    folder = package.removeprefix("cardproof.").replace(".", "/")
    for name, module in modules(package, path, skip):
        entry = getattr(module, attribute, None)
        if not (isinstance(entry, kind) or (isinstance(entry, type) and issubclass(entry, kind))):
            raise ImportError(f"{folder}/{name}.py defines no {attribute} = {kind.__name__}(...)")
        if getattr(entry, key) in found:
            raise ImportError(f"{folder}/{name}.py: {getattr(entry, key)!r} is already registered")
        found[getattr(entry, key)] = entry
    return {getattr(e, key): e for e in sorted(found.values(), key=lambda e: (e.order, getattr(e, key)))}
