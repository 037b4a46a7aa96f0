"""What Terraform users rely on beyond create and destroy, with the real terraform: every attribute is
documented in `terraform providers schema -json`; a computed attribute makes no plan on its own; an object
that already exists is refused at plan time with the `terraform import` command that adopts it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests

from tenants.models import Quota, Tenant
from terraform_provider.tests.conftest import PROVIDER, Terraform

pytestmark = pytest.mark.worker


def test_every_attribute_of_every_resource_and_data_source_has_a_description(
    terraform_binary: str, tmp_path: Path, cli_config: Path
) -> None:
    offline = Terraform(tmp_path, cli_config, "http://127.0.0.1:9", "unused")
    offline.write(PROVIDER)
    offline.run("init")
    schema = json.loads(offline.run("providers", "schema", "-json").stdout)
    (provider,) = schema["provider_schemas"].values()
    blocks = {"provider": provider["provider"]["block"]}
    for group, kind in (("resource_schemas", "resource"), ("data_source_schemas", "data")):
        blocks |= {f"{kind} {name}": s["block"] for name, s in provider[group].items()}
    undocumented = [
        f"{name}.{attribute}"
        for name, block in blocks.items()
        for attribute, spec in block["attributes"].items()
        if not spec.get("description", "").strip()
    ]
    assert len(blocks) == 10  # the provider, six resources, three data sources
    assert undocumented == []
    assert all(
        block.get("description", "").strip() for block in blocks.values() if block is not blocks["provider"]
    )


def test_a_tenant_imported_while_it_is_provisioning_plans_no_change(
    terraform: Terraform, make_tenant: Any, settings: Any
) -> None:
    settings.SIMULATED_PROVISION_DELAY = 60  # it stays provisioning for the whole test
    make_tenant("vision", display_name="Vision")
    assert Tenant.objects.get(slug="vision").state in ("pending", "provisioning")
    terraform.write(
        PROVIDER + 'resource "gpucloud_tenant" "vision" {\n slug = "vision"\n display_name = "Vision"\n}'
    )
    terraform.run("init")
    terraform.run("import", "gpucloud_tenant.vision", "vision")
    assert "No changes." in terraform.plan(expect=0)  # state is gpucloud's to change, not the plan's


def test_a_quota_that_already_exists_is_refused_at_plan_with_the_import_command(
    terraform: Terraform, make_tenant: Any
) -> None:
    make_tenant("vision")
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {terraform.env['GPUCLOUD_TOKEN']}"
    made = api.put(
        f"{terraform.env['GPUCLOUD_ENDPOINT']}/api/v1/tenants/vision/quotas/h200-141gb/",
        json={"guaranteed": 2},
    )
    assert made.status_code == 201
    terraform.write(
        PROVIDER
        + """
        resource "gpucloud_quota" "h200" {
          tenant     = "vision"
          gpu_class  = "h200-141gb"
          guaranteed = 4
        }
        """
    )
    terraform.run("init")
    refused = " ".join(terraform.plan(expect=1).split())
    assert "quota vision/h200-141gb already exists" in refused
    assert "terraform import gpucloud_quota.<name> vision/h200-141gb" in refused
    assert "untaint" not in refused
    assert Quota.objects.get(tenant__slug="vision", gpu_class__name="h200-141gb").guaranteed == 2  # untouched


def test_a_taken_slug_is_refused_at_plan_saying_how_to_adopt_a_live_tenant_or_that_a_deleted_ones_is_gone(
    terraform: Terraform, make_tenant: Any
) -> None:
    make_tenant("vision")  # made in the portal, as the README's first walkthrough does
    make_tenant("old")
    Tenant.objects.filter(slug="old").update(state="deleted")
    terraform.write(PROVIDER + 'resource "gpucloud_tenant" "vision" { slug = "vision" }')
    terraform.run("init")
    refused = " ".join(terraform.plan(expect=1).split())
    assert "adopt it with `terraform import <address> vision`" in refused
    terraform.write(PROVIDER + 'resource "gpucloud_tenant" "old" { slug = "old" }')
    refused = " ".join(terraform.plan(expect=1).split())
    assert "That tenant was deleted, and slugs are never reused: pick another slug." in refused
    assert "import" not in refused
