"""The Queue page: pending workloads with position, reason and estimate; the feasibility form answers every
role, the price only to roles that may see cost; bad input is shown by its field."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from billing.services import rates
from core.audit import Actor
from fleet.models import GpuClass, PendingWorkload
from tenants.services import quotas


@pytest.fixture
def a(people):
    admin = Actor.of(people["admin"])
    h200 = GpuClass.objects.get(name="h200-141gb")
    quotas.set_quota(actor=admin, tenant=people["a"], gpu_class=h200, guaranteed=4, burst=2)
    rates.create_rate_card(
        actor=admin, effective_from=datetime(2026, 1, 1, tzinfo=UTC), prices={"h200-141gb": "2.50"}
    )
    PendingWorkload.objects.create(
        tenant=people["a"],
        host_cluster_id=people["a"].cluster.host_cluster_id,
        namespace=people["a"].cluster.namespace,
        name="too-big",
        queue="default",
        gpus=9,
        gpu_class="h200-141gb",
    )
    return people["a"]


def page(client, user, **query):
    client.force_login(user)
    return client.get(reverse("portal:tenant-queue", kwargs={"slug": "tenant-a"}), query)


def test_the_queue_and_an_answer_with_its_price_for_the_owner(client, people, a):
    html = page(client, people["alice"], gpu_class="h200-141gb", count=2, hours=2).content.decode()

    assert "too-big" in html
    assert "quota exceeded: asks 9 × h200-141gb, guarantee + burst is 6" in html
    assert "It can start now" in html
    assert "10.00 USD" in html  # 2.50 × 2 × 2


def test_a_viewer_gets_the_answer_without_the_price(client, people, a):
    html = page(client, people["bob"], gpu_class="h200-141gb", count=2, hours=2).content.decode()

    assert "It can start now" in html
    assert "USD" not in html


def test_an_ask_beyond_the_burst_says_so_instead_of_calling_it_borrowed(client, people, a):
    html = page(client, people["alice"], gpu_class="h200-141gb", count=5, hours=1).content.decode()
    assert "1 borrowed (burst 2)" in html  # 4 from the guarantee, 1 of the burst

    html = page(client, people["alice"], gpu_class="h200-141gb", count=10, hours=1).content.decode()
    assert "6 beyond it: more than its burst of 2" in html
    assert "borrowed (burst" not in html


def test_bad_input_is_shown_by_its_field(client, people, a):
    response = page(client, people["alice"], gpu_class="h200-141gb", count=0, hours=1)

    assert response.status_code == 200
    assert "greater than or equal to 1" in response.content.decode()
    assert "It can start" not in response.content.decode()


def test_another_tenant_is_not_found(client, people, a):
    assert page(client, people["charlie"]).status_code == 404
