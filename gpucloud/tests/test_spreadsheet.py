"""`gpucloud.spreadsheet.cell`: text a spreadsheet would run as a formula gets a leading '; numbers do not."""

from __future__ import annotations

import pytest

from gpucloud.spreadsheet import cell, record, row


@pytest.mark.parametrize(
    "text", ["=1+1", "+1+1", "-1+1", "@SUM(A1)", "\t=1", "\r=1", "-", "=", "-cmd|' /C calc'!A0"]
)
def test_a_cell_starting_like_a_formula_is_made_text(text):
    assert cell(text) == "'" + text


@pytest.mark.parametrize(
    "value", ["-4.00", "-1", "-1.5E3", "2.50", "GPU-Hours", "ten_abc", "", "{}", 3, None]
)
def test_numbers_and_plain_text_are_left_alone(value):
    assert cell(value) == value


def test_rows_and_records_neutralise_each_cell():
    assert row(["=a", "-2.00", "b"]) == ["'=a", "-2.00", "b"]
    assert record({"x": "@a", "y": "y"}) == {"x": "'@a", "y": "y"}
