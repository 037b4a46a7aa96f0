"""The health-events viewset on its own: whom it shows which events, with and without billing's rule."""

from __future__ import annotations

import pytest
from django.utils import timezone
from rest_framework.test import APIRequestFactory, force_authenticate

from health.api.views import HealthEventViewSet
from health.models import HealthEvent


@pytest.fixture
def event(demo_fleet) -> HealthEvent:
    node = demo_fleet.nodes.order_by("name").first()
    now = timezone.now()
    return HealthEvent.objects.create(
        host_cluster=demo_fleet,
        node=node,
        subject="node",
        signal="node_not_ready",
        severity=HealthEvent.Severity.FATAL,
        action="quarantine",
        source=HealthEvent.Source.KUBERNETES,
        first_seen=now,
        last_seen=now,
    )


def listed(viewset: type[HealthEventViewSet], user) -> list[str]:
    request = APIRequestFactory().get("/api/v1/health-events/")
    force_authenticate(request, user=user)
    response = viewset.as_view({"get": "list"})(request)
    assert response.status_code == 200, response.data
    return [e["id"] for e in response.data["results"]]


def test_without_a_rule_a_tenant_member_sees_no_event_and_an_admin_sees_all(people, event):
    assert listed(HealthEventViewSet, people["alice"]) == []
    assert listed(HealthEventViewSet, people["admin"]) == [event.public_id]


def test_a_rule_decides_what_a_tenant_member_sees_from_their_tenants(people, event):
    asked = []

    def only_tenant_a(tenants):
        asked.append(sorted(t.slug for t in tenants))
        return HealthEvent.objects.filter(pk=event.pk if people["a"] in tenants else -1).values("pk")

    viewset = HealthEventViewSet.seen_by_tenants_as(only_tenant_a)
    assert listed(viewset, people["alice"]) == [event.public_id]
    assert listed(viewset, people["charlie"]) == []
    assert asked == [["tenant-a"], ["tenant-b"]]
