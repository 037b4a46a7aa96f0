"""Geometry of the usage bars the templates draw as SVG (no inline styles: widths are attributes)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bar:
    """One class's use against its guarantee and burst ceiling, as percentages of the bar's length."""

    used: int
    guaranteed: int
    burst: int
    used_pct: float
    guaranteed_pct: float
    within_pct: float  # the part of `used` inside the guarantee
    over_pct: float  # the part borrowed above it

    @property
    def ceiling(self) -> int:
        return self.guaranteed + self.burst


def bar(used: int, guaranteed: int, burst: int) -> Bar:
    length = max(guaranteed + burst, used, 1)

    def pct(units: int) -> float:
        return round(100 * units / length, 2)

    within = min(used, guaranteed)
    return Bar(
        used=used,
        guaranteed=guaranteed,
        burst=burst,
        used_pct=pct(used),
        guaranteed_pct=pct(guaranteed),
        within_pct=pct(within),
        over_pct=pct(used - within),
    )
