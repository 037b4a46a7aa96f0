"""The Standing tab: a member sees the classes and the running pods; money only for roles that may see it."""

from __future__ import annotations

import re
from datetime import timedelta

from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from core.audit import Actor
from fleet.models import GpuClass, Node, Pod
from tenants.services import members, quotas

H200 = "h200-141gb"


def setup(people, make_user, demo_fleet) -> None:
    """Tenant A: 1 H200 guaranteed, 1 burst; a pod holding 2 (one borrowed); mike, a member."""
    admin = Actor.of(people["admin"])
    make_user("mike")
    members.add_member(actor=admin, tenant=people["a"], username="mike", role="member")
    gpu_class = GpuClass.objects.get(name=H200)
    quotas.set_quota(actor=admin, tenant=people["a"], gpu_class=gpu_class, guaranteed=1, burst=1)
    node = Node.objects.filter(host_cluster=demo_fleet, gpus__gpu_model__slug=H200).distinct().first()
    assert node is not None
    Pod.objects.create(
        host_cluster=demo_fleet, tenant=people["a"], namespace="tenant-tenant-a", name="train-0",
        gpu_class=gpu_class, node=node, gpu_uuids=[g.uuid for g in node.gpus.order_by("index")[:2]],
        started_at=timezone.now() - timedelta(hours=1),
    )  # fmt: skip


def test_a_member_sees_the_classes_and_the_running_pods_without_cost(client, people, make_user, demo_fleet):
    setup(people, make_user, demo_fleet)
    client.force_login(User.objects.get(username="mike"))
    response = client.get(reverse("portal:tenant-standing", kwargs={"slug": "tenant-a"}))
    assert response.status_code == 200
    page = response.content.decode()
    assert cells(page, "standing-classes") == [H200, "1", "1", "2", "1", "0"]
    pods = cells(page, "standing-workloads")
    assert pods[:3] == ["train-0", H200, "2"]
    assert "not sampled yet" in pods
    assert 'id="standing-spent"' not in page


def test_the_owner_also_sees_what_it_costs(client, people, make_user, demo_fleet):
    setup(people, make_user, demo_fleet)
    client.force_login(people["alice"])
    page = client.get(reverse("portal:tenant-standing", kwargs={"slug": "tenant-a"})).content.decode()
    assert 'id="standing-spent"' in page
    assert cells(page, "standing-classes")[6:] == ["—", "—"]  # no rate card prices H200 yet
    assert cells(page, "standing-workloads")[-1] == "0 USD"


def cells(page: str, table_id: str) -> list[str]:
    """The text of each body cell of the table, tags and spacing dropped."""
    table = re.search(rf'<table id="{table_id}">.*?<tbody>(.*?)</tbody>', page, re.S)
    assert table is not None, table_id
    found = re.findall(r"<td[^>]*>(.*?)</td>", table.group(1), re.S)
    return [" ".join(re.sub(r"<[^>]+>", " ", c).split()) for c in found]
