"""Health events over the API. Views only translate HTTP to reads and back.

Which events someone other than a platform administrator sees is not health's to say: they see the events that
cost their tenants time, and the credits for that time are billing's (`HealthCredit`), a layer above health.
So the viewset takes that rule as `tenant_events`, and the URL configuration, the one place that composes
every app's views (`gpucloud/api/urls.py`), gives it billing's `credited_events`. A viewset given none shows
such a caller nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import django_filters
from django.db.models import QuerySet
from rest_framework import mixins

from core.permissions import is_platform_admin
from health.api.serializers import HealthEventSerializer
from health.models import HealthEvent
from tenants.api.viewsets import BaseViewSet
from tenants.models import Tenant

# The ids of the events a set of tenants may see (a values() query of `event_id`).
TenantEvents = Callable[[QuerySet[Tenant]], QuerySet[Any]]


class HealthEventFilter(django_filters.FilterSet):
    host_cluster = django_filters.CharFilter(field_name="host_cluster__name")
    node = django_filters.CharFilter(field_name="node__name")
    gpu = django_filters.CharFilter(field_name="gpu__uuid", help_text="GPU UUID")
    severity = django_filters.ChoiceFilter(choices=HealthEvent.Severity.choices)
    signal = django_filters.CharFilter()
    state = django_filters.ChoiceFilter(
        choices=[("open", "open"), ("closed", "closed")], method="by_state", help_text="open or closed"
    )

    class Meta:
        model = HealthEvent
        fields = ["host_cluster", "node", "gpu", "severity", "signal", "state"]

    def by_state(self, queryset: QuerySet[HealthEvent], name: str, value: str) -> QuerySet[HealthEvent]:
        return queryset.filter(closed_at__isnull=value == "open")


class HealthEventViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, BaseViewSet):
    """Health events of GPUs and nodes, newest first. Platform administrators see every event; anyone else
    sees the events that cost their tenants time (those their tenants were credited for), nothing else."""

    serializer_class = HealthEventSerializer
    filterset_class = HealthEventFilter
    lookup_field = "public_id"
    lookup_url_kwarg = "id"

    @classmethod
    def seen_by_tenants_as(cls, rule: TenantEvents) -> type[HealthEventViewSet]:
        """This viewset, showing a caller who is not a platform administrator the events `rule` gives for
        their tenants."""

        def tenant_events(self: HealthEventViewSet, tenants: QuerySet[Tenant]) -> QuerySet[Any] | None:
            return rule(tenants)

        return type(cls.__name__, (cls,), {"tenant_events": tenant_events})

    def tenant_events(self, tenants: QuerySet[Tenant]) -> QuerySet[Any] | None:
        """The ids of the events these tenants may see; None (none) until a rule is given."""
        return None

    def get_queryset(self) -> QuerySet[HealthEvent]:
        events = HealthEvent.objects.select_related("host_cluster", "node", "gpu").order_by(
            "-first_seen", "id"
        )
        if is_platform_admin(self.request.user):
            return events
        visible = self.tenant_events(self.visible_tenants())
        return events.none() if visible is None else events.filter(pk__in=visible)
