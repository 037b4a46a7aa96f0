"""Rate limits for the endpoints worth guessing at (tokens); rates come from settings at request time."""

from __future__ import annotations

from django.conf import settings
from rest_framework.throttling import ScopedRateThrottle


class SettingsScopedThrottle(ScopedRateThrottle):
    """DRF's scoped throttle, reading `GPUCLOUD_THROTTLE_RATES` per request so deployments and tests can
    change it without re-importing DRF's settings."""

    def get_rate(self) -> str | None:
        rates: dict[str, str] = settings.GPUCLOUD_THROTTLE_RATES
        return rates.get(self.scope or "")
