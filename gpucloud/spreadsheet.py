"""CSV cells a spreadsheet will not run: every CSV the product writes passes its text through `cell`.

Excel, LibreOffice and Google Sheets treat a cell that starts with `=`, `+`, `-` or `@` as a formula (and a
tab or carriage return can hide one), so a tenant's display name `=HYPERLINK("https://evil.example",…)`
would become a live link, or worse, in a finance team's export (CWE-1236). Such a cell gets a leading `'`,
which spreadsheets read as "this is text", as OWASP recommends. A plain number, such as the negative amount of
a credit, is left alone: it is data, not a formula, and finance tools must read it as a number.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?")


def cell(value: Any) -> Any:
    """`value`, or for text that a spreadsheet would read as a formula, the same text after a `'`."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not NUMBER.fullmatch(value):
        return "'" + value
    return value


def row(values: Iterable[Any]) -> list[Any]:
    return [cell(value) for value in values]


def record(values: Mapping[str, Any]) -> dict[str, Any]:
    return {key: cell(value) for key, value in values.items()}
