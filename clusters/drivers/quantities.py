"""Kubernetes quantities and counts as gpucloud's rows hold them: whole units, never negative, capped."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

MAX_QUANTITY = 2**31 - 1  # the largest CPU (millicores) or memory (MiB) figure a node row holds


def count(value: str | None) -> int:
    """A label holding a whole number ("8"); missing or malformed counts as 0."""
    try:
        return int(value or 0)
    except ValueError:
        return 0


def quantity(value: Any, unit: Decimal) -> int:
    """A Kubernetes quantity ("96", "95500m", "1056Gi", "1000000Ki") in whole `unit`s, rounded down.

    A missing or malformed quantity counts as 0: the node then takes no pods in the placement model rather
    than stopping the import of the cluster's other nodes.
    """
    try:
        amount = parse_quantity(value) if value is not None else Decimal(0)
    except (ValueError, TypeError, ArithmeticError):
        return 0
    return min(max(0, int(amount / unit)), MAX_QUANTITY)
