"""The emulator behaves like an API server for the official client's typed APIs."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from tests.kube_emulator import Faults, parse_selector, selects, start_emulator
from workers.kube.api import api_client_for_url


def test_core_namespaces_are_created_with_201_and_stamped(kube_client):
    core: Any = client.CoreV1Api(kube_client)

    _, status, _ = core.create_namespace_with_http_info({"metadata": {"name": "a"}})
    ns = core.read_namespace("a")

    assert status == 201
    assert ns.metadata.uid and ns.metadata.resource_version and ns.metadata.creation_timestamp
    assert ns.metadata.labels == {"kubernetes.io/metadata.name": "a"}
    assert ns.status.phase == "Active"
    with pytest.raises(client.ApiException) as conflict:
        core.create_namespace({"metadata": {"name": "a"}})
    assert conflict.value.status == 409


def test_put_replaces_and_bumps_the_resource_version(kube_client):
    core: Any = client.CoreV1Api(kube_client)
    core.create_namespace({"metadata": {"name": "a"}})
    created = core.create_namespaced_config_map("a", {"metadata": {"name": "c"}, "data": {"x": "1"}})

    replaced = core.replace_namespaced_config_map("c", "a", {"metadata": {"name": "c"}, "data": {"y": "2"}})

    assert replaced.data == {"y": "2"}
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)


def test_lists_honour_label_selectors(kube_client):
    core: Any = client.CoreV1Api(kube_client)
    for name, labels in (("a", {"t": "x"}), ("b", {"t": "y"}), ("c", {})):
        core.create_namespace({"metadata": {"name": name, "labels": labels}})

    def names(selector: str) -> list[str]:
        return sorted(ns.metadata.name for ns in core.list_namespace(label_selector=selector).items)

    assert names("t=x") == ["a"]
    assert names("t!=x") == ["b", "c"]
    assert names("t in (x,y)") == ["a", "b"]
    assert names("t notin (x)") == ["b", "c"]
    assert names("t") == ["a", "b"]
    assert names("!t") == ["c"]


def test_discovery_answers_with_the_clients_trailing_slashes(kube_client):
    assert client.VersionApi(kube_client).get_code().git_version == "v1.33.0"
    groups = {g.name for g in client.ApisApi(kube_client).get_api_versions().groups}
    assert {"kueue.x-k8s.io", "scheduling.run.ai", "helm.toolkit.fluxcd.io"} <= groups
    assert client.CoreApi(kube_client).get_api_versions().versions == ["v1"]


def test_an_unregistered_resource_is_404_like_a_missing_crd(kube_client):
    with pytest.raises(client.ApiException) as missing:
        client.CustomObjectsApi(kube_client).list_cluster_custom_object("example.com", "v1", "widgets")
    assert missing.value.status == 404


def test_apply_creates_an_absent_object_then_replaces_gpucloud_fields(kube_emulator, kube_client):
    objects = client.CustomObjectsApi(kube_client)
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": "c"},
        "spec": {"a": 1},
    }
    args = ("kueue.x-k8s.io", "v1beta2", "cohorts", "c")

    objects.patch_cluster_custom_object(
        *args, body, field_manager="gpucloud", force=True, _content_type="application/apply-patch+yaml"
    )
    objects.patch_cluster_custom_object(
        *args,
        {**body, "spec": {"b": 2}},
        field_manager="gpucloud",
        force=True,
        _content_type="application/apply-patch+yaml",
    )

    cohort = kube_emulator.get_object("kueue.x-k8s.io/v1beta2", "Cohort", "c")
    assert cohort["spec"] == {"b": 2}
    assert cohort["metadata"]["generation"] == 2


def test_faults_are_deterministic_by_seed():
    one, two = Faults(share=0.5, seed=3), Faults(share=0.5, seed=3)
    assert [one.draw() for _ in range(50)] == [two.draw() for _ in range(50)]
    assert {one.draw() for _ in range(200)} >= {409, 429, 500}
    assert all(Faults(share=0.0).draw() is None for _ in range(10))


def test_selector_parsing_matches_kubernetes_semantics():
    requirements = parse_selector("app.kubernetes.io/managed-by=gpucloud,gpucloud.io/tenant in (a,b)")
    assert selects(requirements, {"app.kubernetes.io/managed-by": "gpucloud", "gpucloud.io/tenant": "a"})
    assert not selects(requirements, {"app.kubernetes.io/managed-by": "gpucloud", "gpucloud.io/tenant": "c"})
    assert not selects(requirements, {"gpucloud.io/tenant": "a"})


def test_several_emulators_run_side_by_side_and_stop_in_any_order():
    first, second = start_emulator(), start_emulator()
    assert first.url != second.url
    first.stop()
    assert client.VersionApi(api_client_for_url(second.url)).get_code().git_version
    second.stop()
