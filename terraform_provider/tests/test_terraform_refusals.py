"""Bad input and failure through the real terraform: the plan is refused with the API's own messages and
nothing is written; a tenant that fails or is late fails the apply with the reason."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.utils import timezone

from clusters.models import SimulatedTenantCluster
from tenants.models import Membership, Quota, Tenant
from terraform_provider.tests.conftest import PROVIDER, Terraform

pytestmark = pytest.mark.worker


def test_a_plan_with_bad_input_is_refused_with_the_apis_messages_and_writes_nothing(
    terraform: Terraform, make_tenant: Any
) -> None:
    make_tenant("vision")
    terraform.write(
        PROVIDER
        + """
        resource "gpucloud_quota" "too_much" {
          tenant     = "vision"
          gpu_class  = "h200-141gb"
          guaranteed = 100
        }
        resource "gpucloud_member" "nobody" {
          tenant = "vision"
          user   = "nobody"
          role   = "member"
        }
        resource "gpucloud_tenant" "bad" { slug = "Bad_Slug" }
        """
    )
    terraform.run("init")
    refused = " ".join(terraform.plan(expect=1).split())  # terraform wraps long lines
    assert "asked to guarantee 100 on host cluster demo" in refused
    assert "at most 64 can be guaranteed" in refused
    assert "there is no user called 'nobody'" in refused
    assert "'Bad_Slug' is not a valid slug: use 1-40 lowercase letters" in refused
    assert not Quota.objects.exists()
    assert not Membership.objects.filter(user__username="nobody").exists()

    assert not Tenant.objects.filter(slug="Bad_Slug").exists()

    terraform.write(
        PROVIDER + 'resource "gpucloud_tenant" "bad" {\n slug = "bad"\n create_timeout = "soon"\n}'
    )
    refused = " ".join(terraform.plan(expect=1).split())
    assert "create_timeout: 'soon' is not a duration" in refused


def test_an_apply_fails_with_the_tenants_reason_or_its_timeout(terraform: Terraform, settings: Any) -> None:
    settings.SIMULATED_PROVISION_DELAY = 60  # neither tenant gets ready during the test
    terraform.write(
        PROVIDER
        + """
        resource "gpucloud_tenant" "broken" { slug = "broken" }
        resource "gpucloud_tenant" "late" {
          slug           = "late"
          create_timeout = "1s"
        }
        """
    )
    terraform.run("init")
    apply = terraform.popen("apply", "-auto-approve")
    deadline = time.monotonic() + 60
    while not Tenant.objects.filter(slug="broken", state="provisioning").exists():
        assert time.monotonic() < deadline, "tenant broken never started provisioning"
        time.sleep(0.1)
    # What the reconciler records when a host cluster refuses the tenant cluster.
    broken = Tenant.objects.get(slug="broken")
    broken.transition("failed", reason="namespace quota exceeded on demo")
    broken.save(update_fields=["state", "state_reason", "updated_at"])
    output = " ".join(apply.communicate(timeout=60)[0].split())
    assert apply.returncode == 1
    assert "Error: tenant broken did not become ready: failed" in output
    assert "namespace quota exceeded on demo" in output  # the tenant's reason, as the detail
    assert "tenant late did not become ready: still " in output
    assert "after 1s" in output
    state = terraform.run("state", "list").stdout.split()
    assert sorted(state) == ["gpucloud_tenant.broken", "gpucloud_tenant.late"]  # kept (tainted), not lost

    # Slugs are never reused, so a replacement is refused at plan time; untainted, the apply resumes the
    # failed tenant. The late one is still on its way: it plans no change, and gets ready by itself.
    assert "terraform untaint" in terraform.plan(expect=1)
    terraform.run("untaint", "gpucloud_tenant.broken")
    terraform.run("untaint", "gpucloud_tenant.late")
    settings.SIMULATED_PROVISION_DELAY = 0.3
    SimulatedTenantCluster.objects.update(ready_at=timezone.now())  # the host cluster comes through
    plan = " ".join(terraform.plan(expect=2).split())
    assert '~ state = "failed" -> "ready"' in plan
    assert "Plan: 0 to add, 1 to change, 0 to destroy." in plan
    terraform.apply()
    assert Tenant.objects.get(slug="broken").state == "ready"  # the apply waited for it
    while Tenant.objects.get(slug="late").state != "ready":
        assert time.monotonic() < deadline + 60, "tenant late never became ready"
        time.sleep(0.1)
    assert "No changes." in terraform.plan(expect=0)
