"""What was written several times is written once: the bounded-list check, the tolerant read of a JSON column,
the unloading of a router's models before a step of cardproof's own, and the table of cell kinds.

Each shared piece is tested here for what every caller relied on; the callers' own tests (campaign limits,
load and depth schema, variants, fit, history pages) hold that they still say the same.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from cardproof.daemon.campaign import validate
from cardproof.daemon.run.loads import free_router
from cardproof.daemon.store import json_value
from cardproof.report.cell_kinds import KINDS, ORDER, SQL_KINDS, STEP_KINDS, kind_of
from source_trees import parsed

ROOT = Path(__file__).resolve().parent.parent


def _integer(v):
    return validate.integer(v, 1, 10)


def test_a_bounded_list_names_the_whole_the_count_and_the_item_at_fault():
    kw = {"expected": "a non-empty list of integers from 1 to 10", "max_items": 3, "noun": "steps"}
    assert validate.bounded_list([3, 1], _integer, **kw) == [3, 1]
    with pytest.raises(validate.Invalid, match=r"^expected a non-empty list of integers from 1 to 10, got "):
        validate.bounded_list([], _integer, **kw)
    with pytest.raises(validate.Invalid, match=r"^expected a non-empty list"):
        validate.bounded_list((1,), _integer, **kw)  # a tuple only where the caller takes settings built in code
    assert validate.bounded_list((1,), _integer, tuples=True, **kw) == [1]
    assert validate.bounded_list([], _integer, non_empty=False, **kw) == []
    with pytest.raises(validate.Invalid, match=r"^expected at most 3 steps, got 4$"):
        validate.bounded_list([1, 2, 3, 4], _integer, **kw)
    with pytest.raises(validate.Invalid) as bad:
        validate.bounded_list([1, 11], _integer, **kw)
    assert bad.value.at == (1,) and "from 1 to 10" in str(bad.value)
    with pytest.raises(validate.Invalid, match="2 is listed twice") as twice:
        validate.bounded_list([2, 2], _integer, distinct=True, **kw)
    assert twice.value.at == (1,)
    assert validate.bounded_list([2, 2], _integer, **kw) == [2, 2]


@pytest.mark.parametrize("text, kind, default, want", [
    ('{"a": 1}', dict, {}, {"a": 1}),
    ('[1, 2]', list, [], [1, 2]),
    ('[1, 2]', dict, {}, {}),  # of another shape: the default
    ("not json", None, None, None),
    ("{", dict, {}, {}),  # cut short
    (None, list, [], []),  # NULL
    ("", dict, {}, {}),
    ("[" * 100_000 + "]" * 100_000, list, [], []),  # nested past the parser's depth
    ("null", None, "x", None),  # JSON null is a value where no kind is asked
])
def test_a_json_column_is_read_tolerantly(text, kind, default, want):
    assert json_value(text, kind, default) == want


class _Router:
    def __init__(self, statuses, router=True, fails=False):
        self.statuses, self.router, self.fails, self.unloaded = statuses, router, fails, []

    def is_router(self):
        return self.router

    def model_status(self, name):
        if self.fails:
            raise OSError("connection refused")
        return self.statuses.get(name)

    def unload(self, name):
        self.unloaded.append(name)


def test_freeing_a_router_unloads_only_the_loaded_models_and_never_stops_the_step():
    said = []
    backend = _Router({"a": "loaded", "b": "unloaded", "c": "loaded"})
    free_router(SimpleNamespace(backend=backend, echo=said.append), ["a", "b", "c"], "variants")
    assert backend.unloaded == ["a", "c"] and said == []
    single = _Router({"a": "loaded"}, router=False)
    free_router(SimpleNamespace(backend=single, echo=said.append), ["a"], "fit")
    assert single.unloaded == []
    broken = _Router({}, fails=True)
    free_router(SimpleNamespace(backend=broken, echo=said.append), ["a"], "fit")
    assert said == ["fit: could not unload the run's models from the server: connection refused"]


def test_the_cell_kinds_are_one_table():
    assert list(KINDS) == ["measure", "load", "rate", "depth"] and STEP_KINDS == ("load", "rate", "depth")
    assert SQL_KINDS == "('measure', 'load', 'rate', 'depth')" and ORDER["depth"] == 3
    assert kind_of({"kind": None}).name == "measure" and kind_of({}).name == "measure"
    assert [KINDS[k].axis for k in STEP_KINDS] == ["streams", "rate_rps", "depth_tokens"]
    assert KINDS["rate"].axis_value({"rate_rps": 2}) == 2.0 and isinstance(KINDS["rate"].axis_value({"rate_rps": 2}),
                                                                           float)
    assert not KINDS["load"].placed({"streams": 0}) and KINDS["load"].placed({"streams": 4})
    assert not KINDS["rate"].placed({"rate_rps": float("inf")}) and not KINDS["depth"].placed({"depth_tokens": True})


#: where the kinds were told apart by their names, each in its own words
_DISPATCH = re.compile(r"""kind(?:"\])? (?:==|!=) ["'](?:load|rate|depth)["']|["']load["'], ["']rate["'], ["']depth["']""")


def test_no_module_of_the_trend_pages_tells_the_kinds_apart_by_name():
    files = [*(ROOT / "report" / "history").glob("*.py"), ROOT / "report" / "gates.py"]
    found = [f"{p.name}:{n}" for p in files for n, line in enumerate(p.read_text().splitlines(), 1)
             if _DISPATCH.search(line)]
    assert found == []
    assert _DISPATCH.search('if kind == "load":') and _DISPATCH.search("in ('load', 'rate', 'depth')")


def test_one_copy_of_each_shared_piece():
    """The copies that were folded into one are not written again under their old names."""
    defined = {}
    for path in [*(ROOT / "daemon").rglob("*.py"), *(ROOT / "report").rglob("*.py")]:
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.FunctionDef):
                defined.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    assert not {n: defined[n] for n in ("_free_router", "_free", "_step_axis_value") if n in defined}
    assert [p for p in defined.get("_json", []) if p.startswith("report/")] == []
    assert defined["free_router"] == ["daemon/run/loads.py"] and defined["json_value"] == ["daemon/store/__init__.py"]
