"""dcgm-exporter's health fields, read from the same exposition billing reads (`docs/health.md`).

A second scan of the text with its own line regex, so the billing parser (`billing.dcgm`) stays as fast as it
is: exporters without these families cost one failed literal search. Values are per physical GPU (a MIG row
carries its parent's UUID), the largest one a GPU's rows show; DCGM's blanks are dropped.

No Django import: a pure function, tested on its own.
"""

from __future__ import annotations

import math
import re

from billing.dcgm import INT64_BLANK
from fleet.health_rules import FIELDS

# Newline + the common prefix is a literal the regex engine searches for fast (as `billing.dcgm` does); a
# `^…` with MULTILINE would try every position of the text and cost 8× more on a 10,000-GPU round.
_LINE_RE = re.compile(
    r"\n(DCGM_FI_DEV_(?:"
    + "|".join(re.escape(f.removeprefix("DCGM_FI_DEV_")) for f in FIELDS)
    + r"))(?![A-Za-z0-9_:])\{([^\n]*)\}[ \t]*(\S+)"
)

_UUID_RE = re.compile(r'(?:^|,)\s*(?:UUID|uuid)\s*=\s*"([^"\\]+)"')

#: uuid -> field -> value
Readings = dict[str, dict[str, float]]


def read(text: str | bytes) -> Readings:
    """The health fields of every GPU in one exposition, by GPU UUID."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    out: Readings = {}
    for name, labels, raw in _LINE_RE.findall("\n" + text):
        uuid = _uuid(labels)
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
    """The GPU UUID of a label set (a UUID never holds a quote, so no label parsing is needed); None for a
    label set without one, or cut off (an odd number of unescaped quotes)."""
    if (labels.count('"') - labels.count('\\"')) % 2:
        return None
    found = _UUID_RE.search(labels)
    return found.group(1) if found else None
