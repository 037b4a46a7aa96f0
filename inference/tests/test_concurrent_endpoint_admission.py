"""Endpoint admission under concurrency (inference/services.py): the tenant row's lock serialises admissions
of one tenant's endpoints, so concurrent creations never together take more than the quota."""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from core.audit import Actor
from fleet.models import GpuClass
from inference import services
from inference.models import InferenceEndpoint
from inference.services import EndpointExceedsQuota, create_endpoint
from tenants.services import quotas

pytestmark = pytest.mark.django_db(transaction=True)
PARALLEL = 8


def test_concurrent_creations_never_take_more_than_the_guarantee(admin, make_tenant, monkeypatch):
    tenant = make_tenant("team")
    h200 = GpuClass.objects.select_related("gpu_model").get(name="h200-141gb")
    quotas.set_quota(actor=Actor.of(admin), tenant=tenant, gpu_class=h200, guaranteed=4)
    start = threading.Barrier(PARALLEL)
    # Every admission that has read what the others take waits here for all the others to have read it too:
    # without the tenant's lock they all would (each seeing nothing taken); with it, only one gets here at a
    # time, the wait times out, and the barrier stays broken for the rest.
    have_read = threading.Barrier(PARALLEL, timeout=1)
    read = services.held_by_others

    def read_then_wait(endpoint):
        held = read(endpoint)
        with contextlib.suppress(threading.BrokenBarrierError):
            have_read.wait()
        return held

    monkeypatch.setattr(services, "held_by_others", read_then_wait)

    def create(index: int) -> str:
        try:
            start.wait()
            create_endpoint(
                actor=Actor.of(admin), tenant=tenant, name=f"e{index}", model_name="m",
                source_uri="hf://org/m", gpu_class=h200,
            )  # fmt: skip
            return "created"
        except EndpointExceedsQuota:
            return "refused"
        finally:
            connection.close()

    with ThreadPoolExecutor(PARALLEL) as pool:
        outcomes = list(pool.map(create, range(PARALLEL)))

    assert outcomes.count("created") == 4
    assert outcomes.count("refused") == PARALLEL - 4
    assert InferenceEndpoint.objects.filter(tenant=tenant).count() == 4
