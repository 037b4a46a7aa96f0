"""The whole Terraform cycle on deploy/terraform/example/, with the real terraform (1.11.4) against a live
gpucloud on PostgreSQL and a real Celery worker: init through the filesystem mirror, plan, apply, in-place
update, replacement, drift after a change through the API, import, destroy; what it leaves in its working
directory is ignored by git. The platform's rate card is an example of its own (terraform/rate-card)."""

from __future__ import annotations

import json
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import requests
from django.conf import settings

from billing.models import RateCard
from tenants.models import ApiToken, Membership, Quota, Tenant
from terraform_provider.tests.conftest import Terraform

pytestmark = pytest.mark.worker

EXAMPLE = settings.BASE_DIR / "deploy" / "terraform" / "example" / "main.tf"
RATE_CARD = settings.BASE_DIR / "deploy" / "terraform" / "rate-card" / "main.tf"

ADOPTED = """
resource "gpucloud_quota" "vision_a100" {
  tenant     = gpucloud_tenant.vision.slug
  gpu_class  = "a100-80gb"
  guaranteed = 4
}
data "gpucloud_tenant" "seen" {
  slug = gpucloud_tenant.vision.slug
}
output "seen" {
  value = "${data.gpucloud_tenant.seen.state} on ${data.gpucloud_tenant.seen.host_cluster}"
}
"""


def test_the_example_goes_through_the_whole_terraform_cycle(terraform: Terraform, make_user: Any) -> None:
    make_user("alice")
    shutil.copy(EXAMPLE, terraform.workdir / "main.tf")
    terraform.run("init")
    assert (
        'provider "gpucloud.io/gpucloud/gpucloud"' in (terraform.workdir / ".terraform.lock.hcl").read_text()
    )

    assert "Plan: 4 to add, 0 to change, 0 to destroy." in terraform.plan(expect=2)
    terraform.apply()
    vision = Tenant.objects.get(slug="vision")
    assert (vision.state, vision.display_name) == ("ready", "Vision Team")  # create waited for ready
    quota = Quota.objects.get(tenant=vision, gpu_class__name="h200-141gb")
    assert (quota.guaranteed, quota.burst) == (8, 8)
    assert Membership.objects.get(tenant=vision, user__username="alice").role == "owner"
    assert not RateCard.objects.exists()  # prices are the platform's, not a tenant example's
    outputs = json.loads(terraform.run("output", "-json").stdout)
    assert outputs["endpoint"]["value"] == vision.cluster.endpoint
    assert vision.cluster.endpoint in outputs["kubeconfig"]["value"]
    seen = requests.get(
        f"{terraform.env['GPUCLOUD_ENDPOINT']}/api/v1/tenants/vision/",
        headers={"Authorization": f"Bearer {outputs['ci_token']['value']}"},
    )
    assert seen.status_code == 200  # the sensitive secret is the real token
    assert "No changes." in terraform.plan(expect=0)

    # In place: the display name, the guarantee and the role change. Replaced: a token's name cannot
    # change, so a new token replaces the old one, which is revoked.
    old_token = ApiToken.objects.get(tenant=vision, name="ci")
    (terraform.workdir / "terraform.tfvars").write_text(
        'display_name = "Vision"\nh200_guaranteed = 4\nmember_role = "admin"\ntoken_name = "ci-2"\n'
    )
    assert "Plan: 1 to add, 3 to change, 1 to destroy." in terraform.apply()
    vision.refresh_from_db()
    quota.refresh_from_db()
    assert (vision.display_name, quota.guaranteed) == ("Vision", 4)
    assert Membership.objects.get(tenant=vision, user__username="alice").role == "admin"
    old_token.refresh_from_db()
    assert old_token.revoked_at is not None
    assert ApiToken.objects.get(tenant=vision, name="ci-2").revoked_at is None

    # Drift: changes made through the API show in the plan, and the apply puts the configuration back.
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {terraform.env['GPUCLOUD_TOKEN']}"
    base = f"{terraform.env['GPUCLOUD_ENDPOINT']}/api/v1/tenants/vision"
    assert api.put(f"{base}/quotas/h200-141gb/", json={"guaranteed": 2, "burst": 8}).status_code == 200
    assert api.patch(f"{base}/", json={"display_name": "Renamed by hand"}).status_code == 200
    drift = " ".join(terraform.plan(expect=2).split())
    assert "guaranteed = 2 -> 4" in drift
    assert '"Renamed by hand" -> "Vision"' in drift
    terraform.apply()
    quota.refresh_from_db()
    vision.refresh_from_db()
    assert (quota.guaranteed, vision.display_name) == (4, "Vision")

    # Import, each id form: everything but the quota leaves the state and comes back; a quota made by hand
    # is adopted.
    token_id = ApiToken.objects.get(tenant=vision, name="ci-2").public_id
    everything = ["gpucloud_tenant.vision", "gpucloud_member.member", "gpucloud_service_token.ci"]
    terraform.run("state", "rm", *everything)
    terraform.run("import", "gpucloud_tenant.vision", "vision")
    terraform.run("import", "gpucloud_member.member", "vision/alice")
    terraform.run("import", "gpucloud_service_token.ci", f"vision/{token_id}")
    assert api.put(f"{base}/quotas/a100-80gb/", json={"guaranteed": 4}).status_code == 201
    (terraform.workdir / "adopted.tf").write_text(ADOPTED)
    terraform.run("import", "gpucloud_quota.vision_a100", "vision/a100-80gb")
    imported = " ".join(terraform.apply().split())
    # Each is imported as configured; only create_timeout, the provider's own setting that gpucloud does
    # not hold, is recorded in place (as other providers' `timeouts` are after an import).
    assert "Plan: 0 to add, 1 to change, 0 to destroy." in imported
    assert '+ create_timeout = "5m" id = "ten_' in imported
    assert "# (8 unchanged attributes hidden)" in imported
    assert terraform.run("output", "-raw", "seen").stdout == "ready on demo"  # the tenant data source

    # What terraform left in its working directory, and the kubeconfig as the README writes it: git ignores
    # all of it, whether the example runs from its working copy under var/ (README) or where it lies.
    (terraform.workdir / "vision.kubeconfig").write_text(outputs["kubeconfig"]["value"])
    assert not tracked_by_git(terraform.workdir, "var/terraform/example")
    assert not tracked_by_git(terraform.workdir, "deploy/terraform/example")

    # Destroy: the tenant is deleted (and waited for), its guarantees return, its token is revoked, and the
    # platform has nothing left of the example.
    destroyed = terraform.run("destroy", "-auto-approve").stdout
    assert "Destroy complete! Resources: 5 destroyed." in destroyed
    vision.refresh_from_db()
    assert vision.state == "deleted"
    assert not Quota.objects.filter(tenant=vision).exists()
    assert ApiToken.objects.get(tenant=vision, name="ci-2").revoked_at is not None
    assert not RateCard.objects.exists()


EXAMPLE_FILES = {"main.tf", "adopted.tf"}  # the example itself, and the block this test adds


def tracked_by_git(workdir: Path, where: str) -> list[str]:
    """The files terraform (and the README) left in `workdir` that git would see if it were `where`."""
    left = [p.relative_to(workdir) for p in workdir.rglob("*") if p.is_file() and p.name not in EXAMPLE_FILES]
    assert any(p.name == "terraform.tfstate" for p in left)  # state was written: the check checks something
    seen = []
    for path in left:
        candidate = f"{where}/{path}"
        done = subprocess.run(
            ["git", "check-ignore", "-q", "--no-index", candidate], cwd=settings.BASE_DIR, capture_output=True
        )
        assert done.returncode in (0, 1), done.stderr
        if done.returncode == 1:
            seen.append(candidate)
    return seen


def test_the_rate_card_example_sets_the_platforms_prices_on_its_own(terraform: Terraform) -> None:
    shutil.copy(RATE_CARD, terraform.workdir / "main.tf")
    terraform.run("init")
    assert "Plan: 1 to add, 0 to change, 0 to destroy." in terraform.plan(expect=2)
    terraform.apply()
    card = RateCard.objects.get()
    assert (Decimal(card.prices["h200-141gb"]), card.currency) == (Decimal("4.5"), "USD")
    assert terraform.run("output", "-raw", "version").stdout == str(card.version)
    terraform.run("state", "rm", "gpucloud_rate_card.standard")
    terraform.run("import", "gpucloud_rate_card.standard", card.public_id)
    assert "No changes." in terraform.plan(expect=0)  # the API's decimal text equals the configured 4.5
    assert "Destroy complete! Resources: 1 destroyed." in terraform.run("destroy", "-auto-approve").stdout
    assert not RateCard.objects.exists()  # no issued invoice used it: destroy deleted it
