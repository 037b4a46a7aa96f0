"""dcgm-exporter's health fields, read from the same exposition billing reads (`docs/health.md`).

A second scan of the text with its own line regex, so the billing parser (`billing.dcgm`) stays as fast as it
is: exporters without these families cost one failed literal search. Values are per physical GPU (a MIG row
carries its parent's UUID), the largest one a GPU's rows show; DCGM's blanks are dropped.

No Django import: a pure function, tested on its own.
"""

from __future__ import annotations

import math
import re

from billing.dcgm import INT64_BLANK, LabelError, parse_labels
from scheduling.health_rules import FIELDS

_LINE_RE = re.compile(
    r"^(" + "|".join(re.escape(f) for f in FIELDS) + r")\{([^\n]*)\}[ \t]*(\S+)", re.MULTILINE
)

#: uuid -> field -> value
Readings = dict[str, dict[str, float]]


def read(text: str | bytes) -> Readings:
    """The health fields of every GPU in one exposition, by GPU UUID."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    out: Readings = {}
    labels_seen: dict[str, str | None] = {}
    for name, labels, raw in _LINE_RE.findall(text):
        uuid = labels_seen.get(labels, "")
        if uuid == "":
            uuid = labels_seen[labels] = _uuid(labels)
        if uuid is None:
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        if value >= INT64_BLANK or math.isnan(value) or math.isinf(value) or value < 0:
            continue
        fields = out.setdefault(uuid, {})
        fields[name] = max(fields.get(name, value), value)
    return out


def _uuid(labels: str) -> str | None:
    try:
        parsed = parse_labels(labels)
    except LabelError:
        return None
    return parsed.get("UUID") or parsed.get("uuid") or None
