"""`gpucloud_host_cluster` with the real terraform against a live gpucloud and the Kubernetes API stand-in:
register, change in place (cordon, region, a rotated kubeconfig), drift, import, and a destroy refused while
a tenant is on it and done once it is drained; retired (refused at plan while a tenant is on it) and put
back in service."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from clusters.tests.conftest import h200_node, kubeconfig_for
from core.audit import Actor
from core.models import AuditEvent
from fleet.models import HostCluster
from gpucloud import crypto
from tenants.models import Tenant
from tenants.services import lifecycle
from terraform_provider.tests.conftest import PROVIDER, Terraform

pytestmark = pytest.mark.worker


def config(cordoned: bool = False, region: str = "") -> str:
    return (
        PROVIDER
        + f"""
    resource "gpucloud_host_cluster" "east" {{
      name          = "gpu-east"
      kubeconfig    = file("${{path.module}}/kubeconfig.yaml")
      scheduler     = "kueue"
      region        = "{region}"
      cordoned      = {str(cordoned).lower()}
      cordon_reason = "{"hardware refresh" if cordoned else ""}"
    }}
    """
    )


def with_token(url: str, token: str) -> str:
    document = yaml.safe_load(kubeconfig_for(url))
    document["users"][0]["user"]["token"] = token
    return yaml.safe_dump(document)


def test_a_host_cluster_is_registered_changed_imported_and_destroyed_through_terraform(
    terraform: Terraform, kube_emulator: Any, gpu_catalog: None
) -> None:
    for n in (1, 2):
        kube_emulator.put_object(h200_node(f"h200-{n}"))
    (terraform.workdir / "kubeconfig.yaml").write_text(with_token(kube_emulator.url, "first-token"))
    terraform.write(config())
    terraform.run("init")

    assert "Plan: 1 to add, 0 to change, 0 to destroy." in terraform.plan(expect=2)
    terraform.apply()
    east = HostCluster.objects.get(name="gpu-east")
    assert (east.driver, east.nodes.count()) == ("kubernetes", 2)
    assert "first-token" in crypto.decrypt(east.kubeconfig_ciphertext)
    state = (terraform.workdir / "terraform.tfstate").read_text()
    assert "first-token" in state  # the state holds what the configuration gave; the plan never shows it
    assert "first-token" not in terraform.plan(expect=0)

    terraform.write(config(cordoned=True, region="eu-west"))
    (terraform.workdir / "kubeconfig.yaml").write_text(with_token(kube_emulator.url, "second-token"))
    planned = terraform.plan(expect=2)
    assert "Plan: 0 to add, 1 to change, 0 to destroy." in planned
    assert "second-token" not in planned  # sensitive
    terraform.apply()
    east.refresh_from_db()
    assert (east.cordoned, east.cordon_reason, east.region) == (True, "hardware refresh", "eu-west")
    assert "second-token" in crypto.decrypt(east.kubeconfig_ciphertext)
    assert "No changes." in terraform.plan(expect=0)

    # Drift: uncordoned elsewhere; the plan puts it back.
    HostCluster.objects.filter(pk=east.pk).update(cordoned_at=None, cordon_reason="")
    assert "cordoned" in terraform.plan(expect=2)

    # Adopted by another configuration: the kubeconfig is never read back, so it is applied once.
    terraform.run("state", "rm", "gpucloud_host_cluster.east")
    terraform.run("import", "gpucloud_host_cluster.east", "gpu-east")
    assert "Plan: 0 to add, 1 to change, 0 to destroy." in terraform.plan(expect=2)
    terraform.apply()
    assert "No changes." in terraform.plan(expect=0)

    tenant = lifecycle.create_tenant(actor=Actor.console("tests"), slug="vision", host_cluster=None)
    tenant.cluster.host_cluster = east
    tenant.cluster.save()
    refused = terraform.run("destroy", "-auto-approve", expect=1)
    assert "still runs tenants vision" in " ".join((refused.stdout + refused.stderr).split())
    assert HostCluster.objects.filter(pk=east.pk).exists()

    tenant.cluster.host_cluster = HostCluster.objects.get(name="demo")
    tenant.cluster.save()
    destroyed = terraform.run("destroy", "-auto-approve")
    assert "Destroy complete! Resources: 1 destroyed." in destroyed.stdout
    assert not HostCluster.objects.filter(name="gpu-east").exists()
    actions = set(AuditEvent.objects.filter(object_id=east.public_id).values_list("action", flat=True))
    assert {
        "host_cluster.register",
        "host_cluster.update",
        "host_cluster.cordon",
        "host_cluster.delete",
    } <= actions


def retired_config(retired: bool, cordoned: bool) -> str:
    return (
        PROVIDER
        + f"""
    resource "gpucloud_host_cluster" "east" {{
      name          = "gpu-east"
      kubeconfig    = file("${{path.module}}/kubeconfig.yaml")
      scheduler     = "kueue"
      cordoned      = {str(cordoned).lower()}
      cordon_reason = "{"end of lease" if cordoned else ""}"
      retired       = {str(retired).lower()}
    }}
    """
    )


def test_a_host_cluster_is_retired_and_put_back_in_service_through_terraform(
    terraform: Terraform, kube_emulator: Any, gpu_catalog: None
) -> None:
    kube_emulator.put_object(h200_node("h200-1"))
    (terraform.workdir / "kubeconfig.yaml").write_text(kubeconfig_for(kube_emulator.url))
    terraform.write(retired_config(retired=False, cordoned=False))
    terraform.run("init")
    terraform.apply()
    east = HostCluster.objects.get(name="gpu-east")
    tenant = lifecycle.create_tenant(actor=Actor.console("tests"), slug="vision", host_cluster=east)

    terraform.write(retired_config(retired=True, cordoned=False))
    needs_cordon = terraform.plan(expect=1)
    assert "retired = true needs cordoned = true" in needs_cordon

    terraform.write(retired_config(retired=True, cordoned=True))
    refused = " ".join(terraform.plan(expect=1).split())  # gpucloud's dry run, at plan time
    assert "still runs tenants vision: drain it" in refused
    assert HostCluster.objects.get(pk=east.pk).state == "ready"

    Tenant.objects.filter(pk=tenant.pk).update(state=Tenant.State.DELETED)
    planned = terraform.plan(expect=2)
    assert '"ready" -> "retired"' in planned
    terraform.apply()
    east.refresh_from_db()
    assert (east.state, east.cordoned, east.cordon_reason) == ("retired", True, "end of lease")
    assert "No changes." in terraform.plan(expect=0)

    terraform.write(retired_config(retired=False, cordoned=False))
    terraform.apply()
    east.refresh_from_db()
    assert (east.state, east.cordoned) == ("ready", False)
    actions = list(
        AuditEvent.objects.filter(object_id=east.public_id, action__startswith="host_cluster.")
        .order_by("pk")
        .values_list("action", flat=True)
    )
    assert actions[-4:] == [
        "host_cluster.cordon",
        "host_cluster.retire",
        "host_cluster.unretire",
        "host_cluster.uncordon",
    ]

    # Destroy deletes it only without history: a deleted tenant's cluster row keeps it (retire it instead).
    destroy = terraform.run("destroy", "-auto-approve", expect=1)
    assert "retire it instead" in " ".join((destroy.stdout + destroy.stderr).split())
    assert HostCluster.objects.filter(pk=east.pk).exists()
