"""Parsed Python files for the tests that read the code itself: each file parsed once per test session.

Several tests walk every module of the product (layers, the two doors, function length, one copy,
extension points, catalogue marks); parsing each of ~260 files again in each of them took seconds.
The trees are shared: a test only reads them.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path


@functools.lru_cache(maxsize=None)
def _parsed(path: str, mtime_ns: int, size: int) -> ast.Module:
    return ast.parse(Path(path).read_text(encoding="utf-8"), filename=path)


def parsed(path: Path | str) -> ast.Module:
    """The module at ``path``, parsed once for as long as the file is unchanged."""
    st = Path(path).stat()
    return _parsed(str(path), st.st_mtime_ns, st.st_size)
