"""What gpucloud needs of Kueue's Configuration (`config.kueue.x-k8s.io`, the `kueue-manager-config`
ConfigMap) so that every pod of a tenant namespace goes through the tenant's queue.

vCluster syncs pods, not Jobs, into the tenant's host namespace, so on the host Kueue sees plain pods: it
queues them only with its `pod` integration, in namespaces its `managedJobsNamespaceSelector` selects, and
(for a pod without `kueue.x-k8s.io/queue-name`) with `manageJobsWithoutQueueName` or its LocalQueue
defaulting (gpucloud's LocalQueue is named `default`). Fair sharing makes the ClusterQueues' weights count.
`check` judges a parsed Configuration; each `Setting` names the lines to add when it is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpucloud.kube.meta import TRUST_TIER

TIERS = ("isolated", "standard", "trusted")
# The settings without which some tenant pod starts without Kueue admitting it.
EVERY_POD = ("kueue_pod_integration", "kueue_manage_without_queue_name", "kueue_tenant_namespaces")
NAME_LABEL = "kubernetes.io/metadata.name"
WHERE = "in Kueue's Configuration (ConfigMap kueue-manager-config, key controller_manager_config.yaml; "
WHERE += "Helm: managerConfig.controllerManagerConfigYaml), then restart kueue-controller-manager:"
# config.kueue.x-k8s.io/v1beta2 enables fair sharing by the field's presence (v1beta1: `enable: true`).
FAIR_SHARING = "{preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]}"


@dataclass(frozen=True)
class Setting:
    name: str
    holds: bool
    seen: str  # what the configuration says
    without: str  # what goes wrong without it
    how: str  # the lines to add


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels, matchExpressions) against a set of labels."""
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for term in selector.get("matchExpressions") or []:
        key, operator, values = term.get("key", ""), term.get("operator", ""), term.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if (operator == "Exists") != present and operator in ("Exists", "DoesNotExist"):
            return False
    return True


def tenant_namespace(tier: str) -> dict[str, str]:
    """The labels of a tenant's host namespace (clusters/render/namespace.py), for a made-up tenant."""
    return {NAME_LABEL: "tenant-example", TRUST_TIER: tier}


def _namespace_selector(config: dict[str, Any]) -> tuple[bool, str]:
    selector = config.get("managedJobsNamespaceSelector")
    if selector is None:  # Kueue's default: every namespace but kube-system and its own
        kueue = config.get("namespace") or "kueue-system"
        selector = {
            "matchExpressions": [{"key": NAME_LABEL, "operator": "NotIn", "values": ["kube-system", kueue]}]
        }
        seen = "managedJobsNamespaceSelector unset (Kueue's default: all but kube-system and its own)"
    else:
        seen = f"managedJobsNamespaceSelector {selector}"
    missed = [tier for tier in TIERS if not selects(selector, tenant_namespace(tier))]
    return not missed, seen + (f"; does not select {', '.join(missed)} tenant namespaces" if missed else "")


def _fair_sharing(config: dict[str, Any]) -> bool:
    """v1beta2 enables fair sharing by the presence of `fairSharing`; v1beta1 with `enable: true`."""
    fair = config.get("fairSharing")
    if str(config.get("apiVersion", "")).endswith("/v1beta1"):
        return isinstance(fair, dict) and fair.get("enable") is True
    return fair is not None


def _ignores_cpu_and_memory(config: dict[str, Any]) -> bool:
    """CPU and memory, which gpucloud's ClusterQueues do not cover, must not block admission."""
    resources = config.get("resources") or {}
    if resources.get("quotaCheckStrategy") == "IgnoreUndeclared":
        return True
    prefixes = resources.get("excludeResourcePrefixes") or []
    return all(any(name.startswith(p) for p in prefixes) for name in ("cpu", "memory"))


def check(config: dict[str, Any] | None) -> list[Setting]:
    """The settings gpucloud needs, judged from Kueue's parsed Configuration (None: not readable)."""
    unread = "Kueue's configuration could not be read (ConfigMap kueue-manager-config in Kueue's namespace)"
    conf = config or {}
    frameworks = list((conf.get("integrations") or {}).get("frameworks") or ["batch/job"])
    selected, selector_seen = _namespace_selector(conf)
    manage = conf.get("manageJobsWithoutQueueName") is True
    fair = _fair_sharing(conf)
    v1beta1 = str(conf.get("apiVersion", "")).endswith("/v1beta1")
    return [
        Setting(
            "kueue_pod_integration",
            config is not None and "pod" in frameworks,
            f"integrations.frameworks: {', '.join(frameworks)}" if config is not None else unread,
            "pods synced from tenants' vClusters are not queued: they start beside Kueue, held only by the "
            "namespace ResourceQuota (guarantee + burst), and can take GPUs other tenants are guaranteed",
            f"{WHERE} integrations: {{frameworks: [{', '.join(dict.fromkeys([*frameworks, 'pod']))}]}}",
        ),
        Setting(
            "kueue_manage_without_queue_name",
            config is not None and manage,
            f"manageJobsWithoutQueueName: {str(manage).lower()}" if config is not None else unread,
            "a pod without kueue.x-k8s.io/queue-name is queued only through Kueue's LocalQueue defaulting "
            "(gpucloud's LocalQueue is named default); where that is off, it bypasses the queue",
            f"{WHERE} manageJobsWithoutQueueName: true",
        ),
        Setting(
            "kueue_tenant_namespaces",
            config is not None and selected,
            selector_seen if config is not None else unread,
            "Kueue manages no pod of an unselected tenant namespace, even one naming its LocalQueue",
            f"{WHERE} managedJobsNamespaceSelector: {{matchExpressions: "
            f"[{{key: {TRUST_TIER}, operator: Exists}}]}}",
        ),
        Setting(
            "kueue_undeclared_resources",
            config is not None and _ignores_cpu_and_memory(conf),
            f"resources: {conf.get('resources') or 'unset'}" if config is not None else unread,
            "a tenant pod asking for CPU or memory, which tenant ClusterQueues do not cover, is never "
            "admitted (the vCluster's own control plane included, once its namespace is selected)",
            f"{WHERE} resources: {{quotaCheckStrategy: IgnoreUndeclared}}",
        ),
        Setting(
            "kueue_fair_sharing",
            config is not None and fair,
            ("fairSharing set" if fair else "fairSharing unset") if config is not None else unread,
            "borrowed GPUs go first come, first served: the ClusterQueues' fairSharing weights are ignored",
            f"{WHERE} fairSharing: {{enable: true}}" if v1beta1 else f"{WHERE} fairSharing: {FAIR_SHARING}",
        ),
    ]
