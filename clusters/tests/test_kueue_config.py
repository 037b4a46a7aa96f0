"""What gpucloud needs of Kueue's Configuration, judged with the lines to add (drivers/kueue_config.py)."""

from __future__ import annotations

import pytest

from clusters.drivers import conformance
from clusters.drivers.discovery import ClusterDiscovery
from clusters.drivers.kueue_config import check, selects

GOOD = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "manageJobsWithoutQueueName": True,
    "managedJobsNamespaceSelector": {
        "matchExpressions": [{"key": "gpucloud.io/trust-tier", "operator": "Exists"}]
    },
    "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset", "pod"]},
    "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
    "resources": {"quotaCheckStrategy": "IgnoreUndeclared"},
}


def judged(config):
    return {s.name: s for s in check(config)}


def test_a_configuration_with_every_setting_holds():
    assert all(s.holds for s in check(GOOD))


def test_unread_configuration_holds_nothing_and_says_why():
    for setting in check(None):
        assert not setting.holds
        assert "could not be read" in setting.seen


def test_the_pod_integration_missing_is_named_with_the_frameworks_to_set():
    pod = judged(GOOD | {"integrations": {"frameworks": ["batch/job"]}})["kueue_pod_integration"]
    assert not pod.holds
    assert pod.how.endswith("integrations: {frameworks: [batch/job, pod]}")
    assert "ResourceQuota" in pod.without
    assert not judged({k: v for k, v in GOOD.items() if k != "integrations"})["kueue_pod_integration"].holds


def test_manage_jobs_without_queue_name_must_be_true():
    setting = judged(GOOD | {"manageJobsWithoutQueueName": False})["kueue_manage_without_queue_name"]
    assert not setting.holds
    assert setting.how.endswith("manageJobsWithoutQueueName: true")


@pytest.mark.parametrize(
    ("selector", "holds"),
    [
        (None, True),  # Kueue's default: all but kube-system and its own namespace
        ({"matchLabels": {"team": "ml"}}, False),
        (
            {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["a"]}]},
            False,
        ),
        (
            {
                "matchExpressions": [
                    {"key": "gpucloud.io/trust-tier", "operator": "In", "values": ["standard"]}
                ]
            },
            False,
        ),
        (
            {"matchExpressions": [{"key": "gpucloud.io/trust-tier", "operator": "NotIn", "values": ["x"]}]},
            True,
        ),
        ({"matchExpressions": [{"key": "gpucloud.io/trust-tier", "operator": "DoesNotExist"}]}, False),
    ],
)
def test_the_namespace_selector_must_select_tenant_namespaces_of_every_tier(selector, holds):
    config = {k: v for k, v in GOOD.items() if k != "managedJobsNamespaceSelector"}
    if selector is not None:
        config["managedJobsNamespaceSelector"] = selector
    assert judged(config)["kueue_tenant_namespaces"].holds is holds


def test_fair_sharing_is_enabled_by_presence_in_v1beta2_and_by_enable_in_v1beta1():
    v1beta1 = GOOD | {"apiVersion": "config.kueue.x-k8s.io/v1beta1"}
    assert not judged(v1beta1)["kueue_fair_sharing"].holds
    assert judged(v1beta1 | {"fairSharing": {"enable": True}})["kueue_fair_sharing"].holds
    assert judged(v1beta1)["kueue_fair_sharing"].how.endswith("fairSharing: {enable: true}")
    unset = judged({k: v for k, v in GOOD.items() if k != "fairSharing"})["kueue_fair_sharing"]
    assert not unset.holds
    assert "preemptionStrategies" in unset.how


def test_label_selectors_match_like_kubernetes():
    labels = {"a": "1"}
    assert selects({}, labels)
    assert selects({"matchLabels": {"a": "1"}}, labels)
    assert not selects({"matchLabels": {"a": "2"}}, labels)
    assert selects({"matchExpressions": [{"key": "b", "operator": "NotIn", "values": ["1"]}]}, labels)
    assert selects({"matchExpressions": [{"key": "b", "operator": "DoesNotExist"}]}, labels)
    assert not selects({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, labels)


@pytest.mark.parametrize(
    ("resources", "holds"),
    [
        (None, False),
        ({"quotaCheckStrategy": "BlockUndeclared"}, False),
        ({"excludeResourcePrefixes": ["cpu", "memory", "ephemeral-storage"]}, True),
        ({"excludeResourcePrefixes": ["cpu"]}, False),
    ],
)
def test_cpu_and_memory_must_not_block_admission(resources, holds):
    config = {k: v for k, v in GOOD.items() if k != "resources"} | (
        {"resources": resources} if resources else {}
    )
    setting = judged(config)["kueue_undeclared_resources"]
    assert setting.holds is holds
    assert setting.how.endswith("resources: {quotaCheckStrategy: IgnoreUndeclared}")


def test_the_conformance_report_says_pod_groups_are_the_tenants_to_declare():
    def report(config):
        found = ClusterDiscovery("v1.34.0", {"kueue.x-k8s.io": ("v1beta2",)}, [], False, kueue_config=config)
        caps = conformance.check(found, mig_configmap="m", plugin_configmap="p", scheduler="kueue")
        return {c.name: c for c in caps}

    groups = report(GOOD)["kueue_pod_groups"]
    assert groups.found
    assert "kueue.x-k8s.io/pod-group-total-count" in groups.how
    assert report(GOOD)["per_model_quotas"].found
    without_pods = report(GOOD | {"integrations": {"frameworks": ["batch/job"]}})
    assert not without_pods["kueue_pod_groups"].found
    assert not without_pods["per_model_quotas"].found
    assert "kueue_pod_integration" in without_pods["per_model_quotas"].how
