"""A host cluster's profile: the GPU resource names its tenants' quotas name."""

from __future__ import annotations

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
