"""Discovery of what a host cluster runs, against the emulated API server (no mocks)."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.drivers.discovery import (
    UnsupportedCluster,
    check_profile,
    check_scheduler,
    discover,
    missing_resources,
)
from clusters.render import ClusterProfile
from clusters.tests.conftest import quota
from gpucloud.kube.api import KubeApi, api_client_for_url
from tests.kube_emulator import start_emulator


def gpu_node(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": "8", "nvidia.com/mig-1g.18gb": "0"}},
    }


def test_discovery_reads_version_addons_and_gpu_nodes(kube_emulator, kube_client):
    kube_emulator.put_object(
        gpu_node(
            "gpu-1",
            **{
                "nvidia.com/gpu.product": "NVIDIA-H200",
                "nvidia.com/gpu.count": "8",
                "nvidia.com/gpu.memory": "143771",
                "nvidia.com/mig.capable": "true",
                "example.com/topology-rack": "r1",
            },
        )
    )
    kube_emulator.put_object({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cpu-1"}})

    found = discover(KubeApi(kube_client))

    assert found.server_version == "v1.33.0"
    assert found.addons == {
        "kueue": True,
        "kai": True,
        "flux": True,
        "flux_source": True,
        "vcluster_platform": True,
        "cilium": True,
        "gpu_operator": True,
        "dra": False,
        "gateway_api": False,
        "inference_extension": False,
        "kserve": False,
        "kai_topology": True,
        "nvidia_dra_driver": False,
        "nvlink_domains": False,
        "hami": False,
        "mutating_admission_policy_v1": False,
        "mutating_admission_policy_v1beta1": False,
    }
    (node,) = found.gpu_nodes
    assert (node.name, node.product, node.count, node.memory_mib, node.mig_capable) == (
        "gpu-1",
        "NVIDIA-H200",
        8,
        143771,
        True,
    )
    assert node.topology == {"kubernetes.io/hostname": "gpu-1", "example.com/topology-rack": "r1"}
    assert (node.allocatable_cpu_milli, node.allocatable_memory_mib) == (64_000, 0)  # no memory given
    assert found.resource_names() == {"nvidia.com/gpu", "nvidia.com/mig-1g.18gb"}
    check_profile(found, ClusterProfile(scheduler="kai", cilium=True))
    assert missing_resources(found, [quota(), quota("h200.shared", "nvidia.com/gpumem")]) == {
        "nvidia.com/gpumem"
    }


@pytest.mark.parametrize(
    ("cpu", "memory", "expected"),
    [
        ("96", "1056Gi", (96_000, 1_081_344)),
        ("95500m", "1000000Ki", (95_500, 976)),
        ("1.5", "512M", (1_500, 488)),
        ("1e3", "2Ti", (1_000_000, 2_097_152)),
        ("lots", "-1Gi", (0, 0)),  # malformed or negative: the node takes no pods
    ],
)
def test_discovery_reads_cpu_and_memory_from_allocatable_quantities(
    kube_emulator, kube_client, cpu, memory, expected
):
    node = gpu_node("gpu-1", **{"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/gpu.count": "8"})
    node["status"]["allocatable"] |= {"cpu": cpu, "memory": memory}
    kube_emulator.put_object(node)

    (found,) = discover(KubeApi(kube_client)).gpu_nodes

    assert (found.allocatable_cpu_milli, found.allocatable_memory_mib) == expected


def test_a_scheduler_the_cluster_lacks_is_refused_clearly():
    with start_emulator(crds=("kueue", "flux")) as em:
        found = discover(KubeApi(api_client_for_url(em.url)))
    check_scheduler(found, "kueue")
    with pytest.raises(UnsupportedCluster, match="KAI Scheduler is not installed"):
        check_scheduler(found, "kai")
    with pytest.raises(UnsupportedCluster, match="vCluster Platform"):
        check_profile(found, ClusterProfile(vcluster_mode="platform"))


def test_gpu_resources_name_what_the_nodes_models_can_be_asked_for_by_hami_and_every_gpu_device_class():
    with start_emulator(crds=("kueue", "flux", "dra")) as em:
        node = gpu_node("gpu-1", **{"nvidia.com/gpu.product": "NVIDIA-L40S"})
        node["metadata"]["annotations"] = {
            "hami.io/node-nvidia-register": "GPU-0,10,46068,100,NVIDIA-L40S,0,true"
        }
        em.put_object(node)
        for name, driver in (
            ("gpu.nvidia.com", "gpu.nvidia.com"),
            ("mig.nvidia.com", "gpu.nvidia.com"),
            ("gpucloud-l40s-48gb", "gpu.nvidia.com"),
            ("compute-domain-default-channel.nvidia.com", "compute-domain.nvidia.com"),
            ("nic.example.com", "nic.example.com"),
        ):
            cel = {"cel": {"expression": f"device.driver == '{driver}'"}}
            em.put_object(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "DeviceClass",
                    "metadata": {"name": name},
                    "spec": {"selectors": [cel]},
                }
            )
        found = discover(KubeApi(api_client_for_url(em.url)))

    assert found.dra_driver
    assert found.gpu_resources() == (
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices",
        "gpucloud-l40s-48gb.deviceclass.resource.k8s.io/devices",
        "mig.nvidia.com.deviceclass.resource.k8s.io/devices",
        "nvidia.com/gpu",
        "nvidia.com/gpu.shared",  # L40S: no MIG; time-slicing may be configured later
        "nvidia.com/gpucores",  # HAMi serves the node
        "nvidia.com/gpumem",
        "nvidia.com/mig-1g.18gb",  # advertised by the node (gpu_node's allocatable)
    )


def test_a_nodes_model_brings_every_mig_profile_it_could_be_split_into():
    with start_emulator(crds=("kueue",)) as em:
        em.put_object(gpu_node("gpu-1", **{"nvidia.com/gpu.product": "NVIDIA-H200"}))
        names = discover(KubeApi(api_client_for_url(em.url))).gpu_resources()
    assert {"nvidia.com/mig-1g.18gb", "nvidia.com/mig-3g.71gb", "nvidia.com/mig-7g.141gb"} < set(names)
    assert "nvidia.com/gpumem" not in names  # no HAMi here
    assert not any("deviceclass" in name for name in names)  # no DRA here


def test_the_conformance_read_parses_kueues_configuration_from_its_configmap():
    with start_emulator(crds=("kueue",)) as em:
        em.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue"}})
        em.put_object(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {
                    "name": "kueue-controller-manager",
                    "namespace": "kueue",
                    "labels": {"app.kubernetes.io/name": "kueue"},
                },
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [{"name": "m", "image": "registry.k8s.io/kueue/kueue:v0.16.0"}]
                        }
                    }
                },
            }
        )
        data = {
            "controller_manager_config.yaml": "apiVersion: config.kueue.x-k8s.io/v1beta2\n"
            "manageJobsWithoutQueueName: true\n"
        }
        em.put_object(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "kueue-manager-config", "namespace": "kueue"},
                "data": data,
            }
        )
        found = discover(KubeApi(api_client_for_url(em.url)), conformance=True)
        plain = discover(KubeApi(api_client_for_url(em.url)))

    assert found.kueue_image.endswith(":v0.16.0")
    assert found.kueue_config == {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "manageJobsWithoutQueueName": True,
    }
    assert plain.kueue_config is None  # registration reads no more than it needs


def test_discovery_reads_the_api_servers_addresses_from_its_endpoint_slices(kube_emulator, kube_client):
    kube_emulator.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    assert discover(KubeApi(kube_client)).api_server_cidrs == ()  # none published: none known
    for name, family, addresses in (
        ("kubernetes", "IPv4", ["10.0.0.12", "10.0.0.11"]),
        ("kubernetes-v6", "IPv6", ["fd00::11"]),
    ):
        kube_emulator.put_object(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "labels": {"kubernetes.io/service-name": "kubernetes"},
                },
                "addressType": family,
                "endpoints": [
                    {"addresses": [a], "conditions": {"ready": a != "10.0.0.12"}} for a in addresses
                ],
            }
        )
    kube_emulator.put_object(  # another Service's slice is not the API server
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": "web",
                "namespace": "default",
                "labels": {"kubernetes.io/service-name": "web"},
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.9.9.9"]}],
        }
    )

    found = discover(KubeApi(kube_client))

    assert found.api_server_cidrs == ("10.0.0.11/32", "10.0.0.12/32", "fd00::11/128")


def test_without_endpoint_slices_discovery_reads_the_endpoints_object(kube_emulator, kube_client):
    kube_emulator.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    kube_emulator.put_object(
        {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": "kubernetes", "namespace": "default"},
            "subsets": [{"addresses": [{"ip": "192.0.2.5"}], "ports": [{"port": 443}]}],
        }
    )

    assert discover(KubeApi(kube_client)).api_server_cidrs == ("192.0.2.5/32",)
