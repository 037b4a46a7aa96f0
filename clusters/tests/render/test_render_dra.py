"""DRA from inside the tenant's vCluster (clusters/render/dra.py, vcluster.py): what a DRA host cluster's
tenant gets, and that a cluster without DRA gets none of it."""

from __future__ import annotations

import re

import yaml

from clusters.render import ClusterProfile, render_shared, render_tenant
from clusters.render.dra import GPU_CLASS, class_label
from clusters.render.vcluster import render_values
from clusters.tests.render.conftest import quota
from fleet import catalog

DRA = ClusterProfile(dra=True)
L40S = quota("l40s-48gb", guaranteed=1, burst=0)


def test_claims_and_claim_templates_sync_to_the_host_and_the_tenants_device_classes_from_it(make_tenant):
    values = render_values(make_tenant(), DRA)
    assert values["sync"]["toHost"]["resourceClaims"] == {"enabled": True}
    assert values["sync"]["toHost"]["resourceClaimTemplates"] == {"enabled": True}
    device_classes = values["sync"]["fromHost"]["deviceClasses"]
    assert device_classes == {
        "enabled": True,
        "selector": {
            "matchExpressions": [
                {"key": GPU_CLASS, "operator": "In", "values": ["h200-141gb", "h200-141gb.mig-1g.18gb"]}
            ]
        },
    }


def test_the_host_device_classes_carry_the_label_the_selector_reads(make_tenant):
    tenants = [make_tenant(), make_tenant("bolt", quotas=(L40S,))]
    classes = {o["metadata"]["name"]: o for o in render_shared(tenants, DRA) if o["kind"] == "DeviceClass"}
    assert classes["gpucloud-l40s-48gb"]["metadata"]["labels"][GPU_CLASS] == "l40s-48gb"
    assert (
        classes["gpucloud-h200-141gb.mig-1g.18gb"]["metadata"]["labels"][GPU_CLASS]
        == "h200-141gb.mig-1g.18gb"
    )
    # acme's selector leaves bolt's L40S class on the host.
    (expression,) = render_values(tenants[0], DRA)["sync"]["fromHost"]["deviceClasses"]["selector"][
        "matchExpressions"
    ]
    assert "l40s-48gb" not in expression["values"]


def test_a_claim_template_per_class_is_applied_inside_the_vcluster(make_tenant):
    values = render_values(make_tenant(), DRA)
    templates = list(yaml.safe_load_all(values["experimental"]["deploy"]["vcluster"]["manifests"]))
    assert [(t["kind"], t["metadata"]["namespace"], t["metadata"]["name"]) for t in templates] == [
        ("ResourceClaimTemplate", "default", "h200-141gb"),
        ("ResourceClaimTemplate", "default", "h200-141gb.mig-1g.18gb"),
    ]
    (request,) = templates[1]["spec"]["spec"]["devices"]["requests"]
    assert request == {
        "name": "gpu",
        "exactly": {
            "deviceClassName": "gpucloud-h200-141gb.mig-1g.18gb",
            "allocationMode": "ExactCount",
            "count": 1,
        },
    }
    # Not gpucloud's on the host: the synced copies must not look like objects the host pass would prune.
    assert all("app.kubernetes.io/managed-by" not in t["metadata"]["labels"] for t in templates)


def test_no_claim_template_is_rendered_in_the_host_namespace(make_tenant):
    kinds = {o["kind"] for o in render_tenant(make_tenant(), DRA)}
    assert "ResourceClaimTemplate" not in kinds


def test_kai_keeps_its_owner_setting_beside_the_templates(make_tenant):
    values = render_values(make_tenant(), ClusterProfile(scheduler="kai", dra=True))
    assert values["experimental"]["syncSettings"] == {"setOwner": False}
    assert "manifests" in values["experimental"]["deploy"]["vcluster"]


def test_a_tenant_holding_no_dra_class_syncs_its_claims_but_sees_no_device_class(make_tenant):
    shared_only = quota("h200-141gb.shared", "nvidia.com/gpu.shared")
    values = render_values(make_tenant(quotas=(shared_only,)), DRA)
    assert values["sync"]["toHost"]["resourceClaims"] == {"enabled": True}
    assert "deviceClasses" not in values["sync"]["fromHost"]
    assert "experimental" not in values


def test_a_cluster_without_dra_gets_the_same_values_as_before(make_tenant):
    values = render_values(make_tenant(), ClusterProfile())
    assert set(values["sync"]["toHost"]) == {"pods"}
    assert set(values["sync"]["fromHost"]) == {"nodes", "runtimeClasses"}
    assert "experimental" not in values


def test_every_catalog_class_makes_a_valid_label_value():
    """The selector's values are label values: at most 63 characters, alphanumeric at both ends."""
    valid = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$")
    assert all(valid.match(class_label(c.name)) for c in catalog.all_classes())


def test_a_new_class_changes_what_the_vcluster_applies_inside(make_tenant):
    before = render_values(make_tenant(quotas=(quota(),)), DRA)
    after = render_values(make_tenant(quotas=(quota(), L40S)), DRA)
    manifests = after["experimental"]["deploy"]["vcluster"]["manifests"]
    assert manifests != before["experimental"]["deploy"]["vcluster"]["manifests"]
    assert "name: l40s-48gb" in manifests
