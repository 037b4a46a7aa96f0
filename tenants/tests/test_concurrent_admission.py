"""Quota admission under concurrency, over real HTTP against PostgreSQL (issue 10, section 1).

Every class of one GPU model (whole, MIG, shared) holds whole GPUs of that model, so admission must be
serialised per (host cluster, GPU model), not per class: concurrent requests for different classes of one
model must never together guarantee more GPUs than the host cluster has.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests
from django.db import connection

from core.audit import Actor
from fleet.models import Gpu, GpuClass, Node
from tenants.capacity import gpus_needed
from tenants.models import Quota
from tenants.tokens import create_token

pytestmark = pytest.mark.django_db(transaction=True)

# Per GPU, the units of each class: a request for all of a class's units takes every GPU left.
CLASSES = [
    ("h200-141gb", 1),
    ("h200-141gb.shared", 4),
    ("h200-141gb.mig-7g.141gb", 1),
    ("h200-141gb.mig-3g.71gb", 2),
]
PARALLEL = 20


def held_gpus_in_the_database(gpu_model: str) -> int:
    """GPUs the guarantees of every class of the model hold, summed from the quota rows."""
    units: dict[str, int] = defaultdict(int)
    for quota in Quota.objects.filter(gpu_class__gpu_model__slug=gpu_model).select_related("gpu_class"):
        units[quota.gpu_class.name] += quota.guaranteed
    return sum(gpus_needed(GpuClass.objects.get(name=name), n) for name, n in units.items())


def healthy_gpus(gpu_model: str) -> int:
    return Gpu.objects.filter(
        gpu_model__slug=gpu_model, health=Gpu.Health.HEALTHY, node__state=Node.State.READY
    ).count()


def put_concurrently(url: str, token: str, requests_: list[tuple[str, str, dict[str, Any]]]) -> list[int]:
    """PUT every (tenant, class, body) at once, one thread each, released together by a barrier."""
    start = threading.Barrier(len(requests_))

    def put(item: tuple[str, str, dict[str, Any]]) -> int:
        slug, gpu_class, body = item
        start.wait()
        response = requests.put(
            f"{url}/api/v1/tenants/{slug}/quotas/{gpu_class}/",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )
        assert response.status_code in (200, 201, 422), response.text
        return response.status_code

    with ThreadPoolExecutor(len(requests_)) as pool:
        return list(pool.map(put, requests_))


@pytest.mark.parametrize(
    ("held", "rotation"),
    [(0, 0), (8, 1), (8, 2)],
    ids=["first-admission-of-the-model", "after-one-admission", "after-one-admission-rotated"],
)
def test_concurrent_guarantees_of_every_class_of_one_model_never_exceed_its_gpus(
    live_server, admin, make_tenant, held, rotation
):
    if connection.vendor != "postgresql":
        pytest.fail("this test is about PostgreSQL's concurrency; run it with DATABASE_URL=postgres://…")
    for n in range(PARALLEL + 1):  # team-0 holds the earlier guarantee, 1 to 20 race
        make_tenant(f"team-{n}")
    _, token = create_token(actor=Actor.system("tests"), user=admin, name="race", scope="admin")
    if held:  # an earlier guarantee: the model has been admitted on this host cluster before
        put_concurrently(live_server.url, token, [("team-0", "h200-141gb", {"guaranteed": held})])
    free = 64 - held
    work = [(f"team-{n}", *CLASSES[(n + rotation) % len(CLASSES)]) for n in range(1, PARALLEL + 1)]
    asks = [(slug, cls, {"guaranteed": free * per_gpu}) for slug, cls, per_gpu in work]

    statuses = put_concurrently(live_server.url, token, asks)

    assert statuses.count(201) == 1, statuses  # each takes every free GPU: one wins
    rows = requests.get(
        f"{live_server.url}/api/v1/fleet/capacity/?gpu_model=h200-141gb&limit=100",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    ).json()["results"]
    assert rows
    assert all(row["guaranteed"] <= row["capacity"] for row in rows), rows
    assert sum(gpus_needed(GpuClass.objects.get(name=r["gpu_class"]), r["guaranteed"]) for r in rows) <= 64
    assert held_gpus_in_the_database("h200-141gb") <= healthy_gpus("h200-141gb") == 64


# --- two applies that shrink one GPU model and grow another, in opposite orders -----------------------------

ROUNDS = 30


def tenant_manifest(slug: str, h200: int, a100: int) -> dict[str, Any]:
    quotas = [{"gpuClass": "h200-141gb", "guaranteed": h200}, {"gpuClass": "a100-80gb", "guaranteed": a100}]
    return {
        "apiVersion": "gpucloud.io/v1alpha1",
        "kind": "Tenant",
        "metadata": {"name": slug},
        "spec": {"quotas": quotas},
    }


def test_applies_taking_admission_locks_in_opposite_orders_never_deadlock_into_a_500(
    live_server, admin, make_tenant, caplog
):
    if connection.vendor != "postgresql":
        pytest.fail("this test is about PostgreSQL's locks; run it with DATABASE_URL=postgres://…")
    make_tenant("east"), make_tenant("west")
    _, token = create_token(actor=Actor.system("tests"), user=admin, name="race", scope="admin")
    url, headers = f"{live_server.url}/api/v1/apply/", {"Authorization": f"Bearer {token}"}

    def apply(documents: list[dict[str, Any]], start: threading.Barrier | None = None) -> requests.Response:
        if start is not None:
            start.wait()
        return requests.post(url, json={"documents": documents}, headers=headers, timeout=60)

    first = apply([tenant_manifest("east", 2, 1), tenant_manifest("west", 1, 2)])
    assert first.status_code == 200, first.text
    answers = []
    with ThreadPoolExecutor(2) as pool:
        for n in range(ROUNDS):
            # east shrinks H200 and grows A100 while west shrinks A100 and grows H200; next round, back.
            east, west = (1, 2), (2, 1)
            if n % 2:
                east, west = west, east
            start = threading.Barrier(2)
            jobs = [
                pool.submit(apply, [tenant_manifest("east", *east)], start),
                pool.submit(apply, [tenant_manifest("west", *west)], start),
            ]
            answers += [(n, job.result().status_code, job.result().text[:300]) for job in jobs]

    assert [a for a in answers if a[1] != 200] == []
    assert "deadlock detected" not in caplog.text  # the locks are taken in one order: none to run again
    last_east, last_west = ((1, 2), (2, 1)) if (ROUNDS - 1) % 2 == 0 else ((2, 1), (1, 2))
    quotas = {
        (q.tenant.slug, q.gpu_class.name): q.guaranteed
        for q in Quota.objects.select_related("tenant", "gpu_class")
    }
    assert quotas == {
        ("east", "h200-141gb"): last_east[0],
        ("east", "a100-80gb"): last_east[1],
        ("west", "h200-141gb"): last_west[0],
        ("west", "a100-80gb"): last_west[1],
    }
