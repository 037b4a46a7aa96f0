"""A host cluster's profile from its row and settings: the GPU resource names its tenants' quotas name, Pod
Security levels, internet egress, API server."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from clusters.profiles import profile_of
from fleet.models import HostCluster


def test_a_simulated_host_cluster_offers_the_resource_names_of_its_models_classes(demo_fleet):
    names = profile_of(demo_fleet).gpu_resources
    assert {
        "nvidia.com/gpu",
        "nvidia.com/gpu.shared",
        "nvidia.com/mig-1g.18gb",
        "nvidia.com/mig-1g.10gb",
    } < set(names)
    assert {"nvidia.com/gpumem", "nvidia.com/gpucores"} < set(names)  # its HAMi fraction classes
    assert not any("b200" in name or "mig-1g.23gb" in name for name in names)  # no B200 in the demo fleet
    assert list(names) == sorted(set(names))


def test_a_kubernetes_host_cluster_offers_what_discovery_last_read(db):
    cluster = HostCluster.objects.create(
        name="gpu-east",
        driver=HostCluster.Driver.KUBERNETES,
        gpu_resources=["nvidia.com/mig-1g.18gb", "nvidia.com/gpu"],
    )
    assert profile_of(cluster).gpu_resources == ("nvidia.com/gpu", "nvidia.com/mig-1g.18gb")


LEVELS = {"isolated": "restricted", "standard": "baseline", "trusted": "baseline"}


def host_cluster(**fields: object) -> HostCluster:
    return HostCluster(
        name="gpu-east", driver="kubernetes", endpoint_base="https://gpu-east.example", **fields
    )


def test_the_defaults_are_restricted_for_isolated_and_baseline_for_the_rest_with_internet_for_all():
    profile = profile_of(host_cluster())
    assert dict(profile.pod_security) == LEVELS
    assert profile.internet_egress == ("isolated", "standard", "trusted")
    assert profile.api_server_cidrs == ()


def test_the_levels_and_internet_egress_follow_the_settings():
    levels = {**LEVELS, "trusted": "privileged"}
    internet = {"isolated": False, "standard": True, "trusted": True}
    with override_settings(POD_SECURITY=levels, EGRESS_INTERNET=internet):
        profile = profile_of(host_cluster())
    assert profile.pod_security_level("trusted") == "privileged"
    assert profile.internet_egress == ("standard", "trusted")


@pytest.mark.parametrize("levels", [{**LEVELS, "standard": "lenient"}, {"isolated": "restricted"}])
def test_a_level_that_is_not_a_pod_security_standard_is_refused_naming_the_setting(levels):
    with override_settings(POD_SECURITY=levels), pytest.raises(ImproperlyConfigured) as refused:
        profile_of(host_cluster())
    assert "privileged, baseline, restricted" in str(refused.value)
    assert "GPUCLOUD_POD_SECURITY_" in str(refused.value)


def test_the_api_server_addresses_discovered_for_the_cluster_reach_the_profile():
    profile = profile_of(host_cluster(api_server_cidrs=["10.0.0.10/32"]))
    assert profile.api_server_cidrs == ("10.0.0.10/32",)
