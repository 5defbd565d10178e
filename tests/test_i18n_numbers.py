"""Lang.num prints what Babel's format_decimal prints, for every figure a page may hold.

The site's two languages are formatted without Babel's pattern machinery (a build formats hundreds of
thousands of figures); this holds the two equal on generated values, the edge cases of rounding (half to
even on the value's shortest decimal form: 2.675 -> 2.68, 0.125 -> 0.12), negative zero, and
thousands separators, and shows that a wrong rounding would be caught.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

import pytest
from babel.numbers import format_decimal
from hypothesis import given, settings
from hypothesis import strategies as st

from cardproof.report.i18n import Lang

EN, DE = Lang("en"), Lang("de")


def babel(value, digits: int, code: str) -> str:
    return format_decimal(value, format="#,##0" + ("." + "0" * digits if digits else ""), locale=code)


EDGES = [0.0, -0.0, 0.05, -0.05, -0.04, 2.675, 0.125, 0.5, 1.5, 2.5, -2.5, 999.95, -999.95, 1e-7, 5e-324, 3, -7,
         10**12, 1e15, 1e20, 123456789.125, 1234.5678]


@pytest.mark.parametrize("value", EDGES)
@pytest.mark.parametrize("digits", [0, 1, 2, 3, 6])
def test_edge_values_read_as_babel_reads_them(value, digits):
    for L in (EN, DE):
        assert L.num(value, digits) == babel(value, digits, L.code), (value, digits, L.code)


@settings(max_examples=400, deadline=None)
@given(value=st.one_of(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e13, max_value=1e13),
                       st.integers(min_value=-10**13, max_value=10**13)),
       digits=st.integers(min_value=0, max_value=6))
def test_any_figure_reads_as_babel_reads_it(value, digits):
    for L in (EN, DE):
        assert L.num(value, digits) == babel(value, digits, L.code)


def test_the_comparison_can_fail():
    """Half up instead of half to even would differ from Babel on 0.125 (0.13 against 0.12)."""
    half_up = f"{Decimal('0.125').quantize(Decimal('0.01'), rounding=ROUND_HALF_UP):,.2f}"
    assert half_up != babel(0.125, 2, "en") == EN.num(0.125, 2) == "0.12"
    assert DE.num(1234567.891, 2) == "1.234.567,89" and EN.num(1234567.891, 2) == "1,234,567.89"
