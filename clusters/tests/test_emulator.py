"""The emulator behaves like an API server for the official client's typed APIs."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from gpucloud.kube.api import api_client_for_url
from tests.kube_emulator import Faults, parse_selector, selects, start_emulator


def test_core_namespaces_are_created_with_201_and_stamped(kube_client):
    core: Any = client.CoreV1Api(kube_client)

    _, status, _ = core.create_namespace_with_http_info({"metadata": {"name": "a"}})
    ns = core.read_namespace("a")

    assert status == 201
    assert ns.metadata.uid
    assert ns.metadata.resource_version
    assert ns.metadata.creation_timestamp
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


WIDGETS = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
        "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}}}],
    },
}
WIDGET_API = ("example.com", "v1", "w", "widgets")


def _widgets(kube_client: client.ApiClient) -> Any:
    core: Any = client.CoreV1Api(kube_client)
    core.create_namespace({"metadata": {"name": "w"}})
    extensions: Any = client.ApiextensionsV1Api(kube_client)
    extensions.create_custom_resource_definition(WIDGETS, _preload_content=False)
    return client.CustomObjectsApi(kube_client)


def test_a_created_crd_is_served_with_its_status_subresource(kube_client):
    custom = _widgets(kube_client)
    custom.create_namespaced_custom_object(*WIDGET_API, {"metadata": {"name": "a"}, "spec": {"size": 1}})

    custom.patch_namespaced_custom_object(*WIDGET_API, "a", {"status": {"by": "anyone"}})
    assert "status" not in custom.get_namespaced_custom_object(*WIDGET_API, "a")  # only /status writes it
    custom.patch_namespaced_custom_object_status(*WIDGET_API, "a", {"status": {"by": "controller"}})
    after_status = custom.get_namespaced_custom_object(*WIDGET_API, "a")
    custom.patch_namespaced_custom_object(*WIDGET_API, "a", {"spec": {"size": 2}})
    after_spec = custom.get_namespaced_custom_object(*WIDGET_API, "a")

    assert (after_status["status"], after_status["metadata"]["generation"]) == ({"by": "controller"}, 1)
    assert (after_spec["status"], after_spec["metadata"]["generation"]) == ({"by": "controller"}, 2)


def test_finalizers_hold_a_deletion_until_the_last_is_removed(kube_client):
    custom = _widgets(kube_client)
    custom.create_namespaced_custom_object(*WIDGET_API, {"metadata": {"name": "a", "finalizers": ["x/y"]}})

    custom.delete_namespaced_custom_object(*WIDGET_API, "a")
    held = custom.get_namespaced_custom_object(*WIDGET_API, "a")
    stale = {"metadata": {"finalizers": [], "resourceVersion": "1"}}
    with pytest.raises(client.ApiException) as conflict:
        custom.patch_namespaced_custom_object(*WIDGET_API, "a", stale)  # a precondition on the version
    custom.patch_namespaced_custom_object(*WIDGET_API, "a", {"metadata": {"finalizers": None}})

    assert held["metadata"]["deletionTimestamp"]
    assert conflict.value.status == 409
    with pytest.raises(client.ApiException) as gone:
        custom.get_namespaced_custom_object(*WIDGET_API, "a")
    assert gone.value.status == 404


def test_the_official_watch_replays_from_a_version_and_gets_410_after_compaction(kube_emulator, kube_client):
    from kubernetes import watch

    custom = _widgets(kube_client)
    version = custom.list_namespaced_custom_object(*WIDGET_API)["metadata"]["resourceVersion"]
    custom.create_namespaced_custom_object(*WIDGET_API, {"metadata": {"name": "a"}})
    custom.patch_namespaced_custom_object(*WIDGET_API, "a", {"spec": {"size": 3}})
    custom.delete_namespaced_custom_object(*WIDGET_API, "a")

    events = list(
        watch.Watch().stream(
            custom.list_namespaced_custom_object, *WIDGET_API, resource_version=version, timeout_seconds=1
        )
    )
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"),
        ("MODIFIED", "a"),
        ("DELETED", "a"),
    ]

    kube_emulator.compact()
    with pytest.raises(client.ApiException) as expired:
        list(
            watch.Watch().stream(
                custom.list_namespaced_custom_object, *WIDGET_API, resource_version=version, timeout_seconds=1
            )
        )
    assert expired.value.status == 410
