"""The JSON parser of the API: DRF's, with a nesting limit and no NUL characters anywhere in the document.

Python's decoder recurses once per `[` or `{`, so a body of 100,000 `[` would exhaust the stack; PostgreSQL
cannot store NUL (U+0000) in text or jsonb, so a NUL that reached a query would fail there as a 500. Both are
refused here, for every endpoint at once, as a 400 problem naming where in the body the fault is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import parsers

from gpucloud.errors import ValidationFailed

MAX_DEPTH = 32  # the deepest body the API takes is 3 levels (what-if gang topology); this is ample


class JSONParser(parsers.JSONParser):
    """Refuses documents nested deeper than MAX_DEPTH and strings (values or keys) holding NUL."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            document = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise _too_deep("_") from None
        check_document(document)
        return document


def check_document(document: Any) -> None:
    """Walks the parsed document without recursion: depth first, each node with its path and depth."""
    pending: list[tuple[Any, str, int]] = [(document, "", 1)]
    while pending:
        node, path, depth = pending.pop()
        if isinstance(node, str):
            if "\x00" in node:
                raise _nul(path or "_")
            continue
        if not isinstance(node, Mapping | list):
            continue
        if depth > MAX_DEPTH:
            raise _too_deep(path or "_")
        items = node.items() if isinstance(node, Mapping) else enumerate(node)
        for key, child in items:
            if isinstance(key, str) and "\x00" in key:
                raise _nul(f"{path}.{key!r}" if path else repr(key))
            name = f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))
            pending.append((child, name, depth + 1))


def _too_deep(where: str) -> ValidationFailed:
    return ValidationFailed.on(where, f"the JSON body is nested more than {MAX_DEPTH} levels deep")


def _nul(where: str) -> ValidationFailed:
    return ValidationFailed.on(where, "NUL characters (\\u0000) are not allowed in text")
