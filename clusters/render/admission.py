"""ValidatingAdmissionPolicies that refuse, in a tenant's host namespace, the pods its vCluster may not sync.

A tenant owner is cluster-admin inside their vCluster, so whatever they write reaches the host as a pod in
their host namespace (the syncer creates it). These policies are what then holds on the host cluster
(docs/kubernetes.md, "Admission policies"):

- one `ValidatingAdmissionPolicy` and one binding per trust tier (`gpucloud-pods-<tier>`, shared objects),
  the binding selecting the namespaces gpucloud manages with that tier's label;
- per tenant, the params ConfigMap `gpucloud-admission` in its host namespace: the binding's `paramRef` names
  it without a namespace, so each namespace's own is used, and a namespace without one refuses every pod.

Each rule is one validation whose `messageExpression` names the rule, the offending field and what is
allowed. The expressions use standard CEL and its macros only (no Kubernetes CEL library), so the test judge
evaluates them with a plain CEL runtime (tests/judges/admission.py).

Nodes a tenant's pod must never aim at: another tenant's dedicated nodes (label and taint
`gpucloud.io/tenant=<slug>`), quarantined nodes (taint `gpucloud.io/quarantine`, and the cordon
`node.kubernetes.io/unschedulable` that goes with it), and nodes whose MIG layout is being changed (gpucloud's
taint `gpucloud.io/mig-reconfigure`, and the GPU Operator MIG manager's label `nvidia.com/mig.config.state`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from clusters.spec import QuotaSpec, TenantSpec
from fleet import catalog
from gpucloud.kube.meta import MANAGED_BY, MANAGER, SHARED, TENANT, TRUST_TIER, Manifest, obj, owned

from . import dra, kai, kueue
from .profile import ClusterProfile

API = "admissionregistration.k8s.io/v1"
PARAMS = "gpucloud-admission"
COMPONENT = "app.kubernetes.io/component"
COMPONENT_VALUE = "admission"  # the params ConfigMaps carry it: the driver lists ConfigMaps by it
KAI_SCHEDULER_NAME = "kai-scheduler"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KAI_QUEUE_LABEL = "kai.scheduler/queue"

DEDICATED_TO = TENANT  # on a node: dedicated to that tenant (DESIGN26: gpucloud.kube.meta.DEDICATED_TO)
QUARANTINE = "gpucloud.io/quarantine"  # health/node_driver.py TAINT_KEY
MIG_RECONFIGURE = "gpucloud.io/mig-reconfigure"  # clusters/drivers/gpu_operator.py MIG_TAINT
MIG_STATE = "nvidia.com/mig.config.state"  # set by the GPU Operator's MIG manager (pending, rebooting…)
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"  # a cordoned node; quarantine cordons
# Node keys no selector, affinity or toleration of a tenant pod may name.
RESERVED_NODE_KEYS = (QUARANTINE, MIG_RECONFIGURE, MIG_STATE)
RESERVED_TAINT_KEYS = (QUARANTINE, MIG_RECONFIGURE, UNSCHEDULABLE)

# Which kinds of GPU class each tier may hold: the same rule as tenants.tiers.KINDS (which needs Django, so
# cannot be imported by a renderer; clusters/tests/render/test_render_admission.py checks that the two agree).
TIER_KINDS = {
    "isolated": (catalog.WHOLE,),
    "standard": (catalog.WHOLE, catalog.MIG),
    "trusted": (catalog.WHOLE, catalog.MIG, catalog.SHARED, catalog.FRACTION),
}
# Capabilities a container may add under each Pod Security level (kubernetes.io/docs/concepts/security/
# pod-security-standards: baseline "Capabilities", restricted "Capabilities (v1.22+)").
CAPABILITIES = {
    "privileged": (),  # no limit: the policy then checks nothing about capabilities
    "baseline": (
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    ),
    "restricted": ("NET_BIND_SERVICE",),
}
TIERS = tuple(TIER_KINDS)


def policy_name(tier: str) -> str:
    return f"gpucloud-pods-{tier}"


def class_kind(quota: QuotaSpec) -> str:
    """whole | mig | shared | fraction, from what the renderer knows of a quota."""
    if catalog.hami_percent(quota.gpu_class):
        return catalog.FRACTION
    if quota.resource_name == "nvidia.com/gpu.shared" or quota.gpu_class.endswith(".shared"):
        return catalog.SHARED
    if quota.resource_name.startswith("nvidia.com/mig-"):
        return catalog.MIG
    return catalog.WHOLE


def allowed_resources(tenant: TenantSpec) -> list[str]:
    """GPU resource names the tenant holds a quota for and its tier allows (HAMi's memory and cores too)."""
    names: set[str] = set()
    for quota in tenant.quotas:
        if class_kind(quota) in TIER_KINDS[tenant.trust_tier]:
            names.add(quota.resource_name)
            names.update(name for name, _ in quota.per_unit)
    return sorted(names)


def allowed_device_classes(tenant: TenantSpec) -> list[str]:
    """The DeviceClasses the tenant's claims may name: gpucloud's, of the classes it holds and its tier
    allows."""
    return sorted(
        dra.device_class_name(q.gpu_class)
        for q in tenant.quotas
        if dra.served(q) and class_kind(q) in TIER_KINDS[tenant.trust_tier]
    )


def render_params(tenant: TenantSpec, profile: ClusterProfile) -> Manifest:
    """The tenant's admission parameters, read by its tier's policy through the binding's `paramRef`."""
    kai_cluster = profile.scheduler == "kai"
    data = {
        "tenant": tenant.slug,
        "tier": tenant.trust_tier,
        "scheduler": profile.scheduler,
        "queue": kai.leaf_queue_name(tenant) if kai_cluster else kueue.LOCAL_QUEUE,
        "schedulerName": KAI_SCHEDULER_NAME if kai_cluster else "",
        "gpuResources": ",".join(sorted(profile.gpu_resources)),
        "allowedResources": ",".join(allowed_resources(tenant)),
    }
    if profile.dra:
        data["deviceClasses"] = ",".join(allowed_device_classes(tenant))
    params = obj("v1", "ConfigMap", PARAMS, tenant.namespace, data=data)
    params["metadata"]["labels"] = {COMPONENT: COMPONENT_VALUE}
    return owned(params, tenant.slug)


# --- the CEL ---------------------------------------------------------------------------------------------


def _has(path: str) -> str:
    """`has()` of every step of a dotted path below its root, so a missing parent is false, not an error."""
    parts = path.split(".")
    return " && ".join(f"has({'.'.join(parts[: i + 1])})" for i in range(1, len(parts)))


def _or_empty(path: str, empty: str = "[]") -> str:
    return f"({_has(path)} ? {path} : {empty})"


def _quoted(values: Iterable[str]) -> str:
    return "[" + ", ".join(f"'{v}'" for v in values) + "]"


def _in_csv(name: str, csv: str) -> str:
    """Membership in a comma-separated params string, with standard CEL only (no `split`)."""
    return f"(',' + {csv} + ',').contains(',' + {name} + ',')"


AFFINITY = "object.spec.affinity.nodeAffinity"
REQUIRED = f"{AFFINITY}.requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = f"{AFFINITY}.preferredDuringSchedulingIgnoredDuringExecution"


def _resource_keys(c: str) -> str:
    """The resource names container `c` requests or limits (map keys, via the `map` macro)."""
    return (
        f"(has({c}.resources) && has({c}.resources.requests) ? {c}.resources.requests.map(k, k) : []) + "
        f"(has({c}.resources) && has({c}.resources.limits) ? {c}.resources.limits.map(k, k) : [])"
    )


# A GPU resource: any NVIDIA name, or any name the cluster's GPU nodes advertise (HAMi's, DRA counts…).
_GPU_NAME = f"(n.startsWith('nvidia.com/') || {_in_csv('n', 'params.data.gpuResources')})"
_OFFERED = _in_csv("n", "params.data.gpuResources")
_NOT_OFFERED = f"params.data.gpuResources != '' && n.startsWith('nvidia.com/') && !{_OFFERED}"
_NOT_ALLOWED = f"{_GPU_NAME} && !{_in_csv('n', 'params.data.allowedResources')}"
_BAD_EXPRESSION = (
    f"(e.key in {_quoted(RESERVED_NODE_KEYS)} || (e.key == '{DEDICATED_TO}' && "
    "!(e.operator == 'DoesNotExist' || (e.operator == 'In' && e.values.all(v, v == params.data.tenant)))))"
)
_TOLERATION_KEY = "(has(t.key) ? t.key : '')"
_TOLERATION_OP = "(has(t.operator) ? t.operator : 'Equal')"
_BAD_TOLERATION = (
    f"(({_TOLERATION_KEY} == '' && {_TOLERATION_OP} == 'Exists') || "
    f"{_TOLERATION_KEY} in {_quoted(RESERVED_TAINT_KEYS)} || "
    f"({_TOLERATION_KEY} == '{DEDICATED_TO}' && "
    f"({_TOLERATION_OP} == 'Exists' || (has(t.value) ? t.value : '') != params.data.tenant)))"
)
_LABELS = "(has(object.metadata.labels) ? object.metadata.labels : {})"


def _variables() -> list[dict[str, str]]:
    containers = (
        f"object.spec.containers + {_or_empty('object.spec.initContainers')}"
        f" + {_or_empty('object.spec.ephemeralContainers')}"
    )
    return [
        {"name": "containers", "expression": containers},
        {
            "name": "notOffered",
            "expression": f"variables.containers.filter(c, {_offends('c', _NOT_OFFERED)})",
        },
        {
            "name": "notAllowed",
            "expression": f"variables.containers.filter(c, {_offends('c', _NOT_ALLOWED)})",
        },
        {"name": "nodeSelector", "expression": _or_empty("object.spec.nodeSelector", "{}")},
        {
            "name": "nodeTerms",
            "expression": f"{_or_empty(f'{REQUIRED}.nodeSelectorTerms')} + "
            f"{_or_empty(PREFERRED)}.map(p, p.preference)",
        },
        {
            "name": "badNodeExpressions",
            "expression": "variables.nodeTerms.filter(t, has(t.matchExpressions) && "
            f"t.matchExpressions.exists(e, {_BAD_EXPRESSION})).map(t, "
            f"t.matchExpressions.filter(e, {_BAD_EXPRESSION})[0])",
        },
        {"name": "tolerations", "expression": _or_empty("object.spec.tolerations")},
        {"name": "labels", "expression": _LABELS},
    ]


@dataclass(frozen=True)
class Rule:
    """One validation: `expression` holds for an admitted pod; `message` (CEL) says what was refused."""

    name: str
    expression: str
    message: str
    create_only: bool = False

    def validation(self) -> dict[str, str]:
        expression = self.expression
        if self.create_only:
            expression = f"request.operation != 'CREATE' || ({expression})"
        message = f"'{self.name}: ' + {self.message}"
        return {"expression": expression, "messageExpression": message, "reason": "Forbidden"}


def _host_rules() -> list[Rule]:
    rules = [
        Rule(
            f"host-{field[4:].lower()}",
            f"!(has(object.spec.{field}) && object.spec.{field})",
            f"'spec.{field} is true; tenant pods share no host namespace: leave {field} unset'",
        )
        for field in ("hostNetwork", "hostPID", "hostIPC")
    ]
    volume = "object.spec.volumes.filter(v, has(v.hostPath))[0]"
    rules.append(
        Rule(
            "host-path",
            "!(has(object.spec.volumes) && object.spec.volumes.exists(v, has(v.hostPath)))",
            f"'volume ' + {volume}.name + ' mounts host path ' + {volume}.hostPath.path + "
            "'; tenant pods may not use hostPath volumes: use emptyDir, a PersistentVolumeClaim or a "
            "ConfigMap/Secret'",
        )
    )
    privileged = "has(c.securityContext) && has(c.securityContext.privileged) && c.securityContext.privileged"
    rules.append(
        Rule(
            "privileged",
            f"!variables.containers.exists(c, {privileged})",
            f"'container ' + variables.containers.filter(c, {privileged})[0].name + "
            "' sets securityContext.privileged; tenant containers may not be privileged'",
        )
    )
    return rules


def _capability_rule(level: str) -> Rule | None:
    if level not in CAPABILITIES:
        raise ValueError(f"unknown Pod Security level {level!r}: choose one of {', '.join(CAPABILITIES)}")
    if level == "privileged":
        return None
    allowed = CAPABILITIES[level]
    adds = _or_empty("c.securityContext.capabilities.add")
    bad = f"{adds}.exists(x, !(x in {_quoted(allowed)}))"
    container = f"variables.containers.filter(c, {bad})[0]"
    capability = f"{container}.securityContext.capabilities.add.filter(x, !(x in {_quoted(allowed)}))[0]"
    return Rule(
        "capabilities",
        f"!variables.containers.exists(c, {bad})",
        f"'container ' + {container}.name + ' adds capability ' + {capability} + "
        f"' beyond Pod Security {level} of this tier; it may add: {', '.join(allowed)}'",
    )


def _offends(c: str, test: str) -> str:
    return f"({_resource_keys(c)}).exists(n, {test})"


def _offender(variable: str, test: str) -> str:
    """'container <name> asks for <resource>' of the first container in `variable` (a filtered list)."""
    first = f"variables.{variable}[0]"
    return f"'container ' + {first}.name + ' asks for ' + ({_resource_keys(first)}).filter(n, {test})[0]"


def _gpu_rules() -> list[Rule]:
    allowed = "(params.data.allowedResources == '' ? 'none' : params.data.allowedResources)"
    return [
        Rule(
            "gpu-resource-not-offered",
            "variables.notOffered.size() == 0",
            f"{_offender('notOffered', _NOT_OFFERED)} + "
            "', which no node of this cluster offers; it offers: ' + params.data.gpuResources",
        ),
        Rule(
            "gpu-resource-not-allowed",
            "variables.notAllowed.size() == 0",
            f"{_offender('notAllowed', _NOT_ALLOWED)} + ', which tenant ' + params.data.tenant + "
            "' holds no quota for or its tier (' + params.data.tier + ') does not allow; it may ask for: ' + "
            f"{allowed}",
        ),
    ]


def _node_rules() -> list[Rule]:
    bad_selector = (
        f"k in {_quoted(RESERVED_NODE_KEYS)} || "
        f"(k == '{DEDICATED_TO}' && variables.nodeSelector[k] != params.data.tenant)"
    )
    selector_key = f"variables.nodeSelector.filter(k, {bad_selector})[0]"
    expression = "variables.badNodeExpressions[0]"
    toleration = f"variables.tolerations.filter(t, {_BAD_TOLERATION})[0]"
    key = "(has(t.key) && t.key != '' ? t.key : '<any key>')"
    reach = (
        f"' reaches nodes tenant pods may not use: another tenant\\'s dedicated nodes ({DEDICATED_TO} other "
        f"than ' + params.data.tenant + '), quarantined nodes ({QUARANTINE}, {UNSCHEDULABLE}) or nodes being "
        f"reconfigured ({MIG_RECONFIGURE}, {MIG_STATE})'"
    )
    return [
        Rule(
            "node-name",
            "!has(object.spec.nodeName) || object.spec.nodeName == ''",
            "'spec.nodeName is set (' + object.spec.nodeName + '); tenant pods are placed by the scheduler: "
            "leave nodeName unset and use nodeSelector or affinity'",
            create_only=True,
        ),
        Rule(
            "node-selector",
            f"!variables.nodeSelector.exists(k, {bad_selector})",
            f"'spec.nodeSelector ' + {selector_key} + '=' + variables.nodeSelector[{selector_key}] + {reach}",
        ),
        Rule(
            "node-affinity",
            "variables.badNodeExpressions.size() == 0",
            f"'spec.affinity.nodeAffinity term ' + {expression}.key + ' ' + {expression}.operator + "
            f"{reach} + '; on {DEDICATED_TO} only In [' + params.data.tenant + '] or DoesNotExist is "
            "allowed'",
        ),
        Rule(
            "toleration",
            f"!variables.tolerations.exists(t, {_BAD_TOLERATION})",
            f"'spec.tolerations tolerates ' + [{toleration}].map(t, {key} + ' ' + {_TOLERATION_OP})[0] + "
            f"{reach} + '; the only gpucloud taint it may tolerate is {DEDICATED_TO}=' + params.data.tenant",
        ),
    ]


def _queue_rules() -> list[Rule]:
    def label(key: str) -> str:
        return f"(('{key}' in variables.labels) ? variables.labels['{key}'] : '<none>')"

    return [
        Rule(
            "queue",
            f"params.data.scheduler != 'kueue' || {label(KUEUE_QUEUE_LABEL)} == params.data.queue",
            f"'label {KUEUE_QUEUE_LABEL} is ' + {label(KUEUE_QUEUE_LABEL)} + '; every pod of tenant ' + "
            "params.data.tenant + ' goes through its own LocalQueue: ' + params.data.queue",
        ),
        Rule(
            "queue",
            f"params.data.scheduler != 'kai' || {label(KAI_QUEUE_LABEL)} == params.data.queue",
            f"'label {KAI_QUEUE_LABEL} is ' + {label(KAI_QUEUE_LABEL)} + '; every pod of tenant ' + "
            "params.data.tenant + ' goes through its own KAI queue: ' + params.data.queue",
        ),
        Rule(
            "scheduler-name",
            "params.data.scheduler != 'kai' || "
            "(has(object.spec.schedulerName) && object.spec.schedulerName == params.data.schedulerName)",
            "'spec.schedulerName is ' + (has(object.spec.schedulerName) ? object.spec.schedulerName : "
            "'<default-scheduler>') + '; tenant pods are scheduled by ' + params.data.schedulerName",
        ),
    ]


def rules(level: str) -> list[Rule]:
    """Every rule of a tier whose Pod Security level is `level`, in the order they are reported."""
    capability = _capability_rule(level)
    return [
        *_gpu_rules(),
        *_node_rules(),
        *_host_rules(),
        *([capability] if capability else []),
        *_queue_rules(),
    ]


def render_policy(tier: str, profile: ClusterProfile) -> Manifest:
    """The tier's policy: every rule, over pods created or updated in a namespace its binding selects."""
    level = dict(profile.pod_security).get(tier, "restricted")
    spec: dict[str, Any] = {
        "failurePolicy": "Fail",
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"],
                    # The ephemeralcontainers subresource adds containers to a running pod; binding does not
                    # create a pod (the scheduler's), and status is the kubelet's.
                    "resources": ["pods", "pods/ephemeralcontainers"],
                }
            ]
        },
        "matchConditions": [
            {
                # The host's own controllers (the StatefulSet running the vCluster's control plane) are not
                # the tenant: everything the vCluster syncs arrives as its own ServiceAccount.
                "name": "not-a-host-controller",
                "expression": "!request.userInfo.username.startsWith('system:serviceaccount:kube-system:')",
            },
            {
                # An update that leaves spec and labels alone (Kueue removing its finalizer, an annotation) is
                # not judged again: no rule reads anything else, and a pod from before the policy must still
                # be able to finish.
                "name": "changes-spec-or-labels",
                "expression": "request.operation != 'UPDATE' || object.spec != oldObject.spec || "
                f"{_LABELS} != {_LABELS.replace('object.', 'oldObject.')}",
            },
        ],
        "variables": _variables(),
        "validations": [rule.validation() for rule in rules(level)],
    }
    policy = obj(API, "ValidatingAdmissionPolicy", policy_name(tier), spec=spec)
    return owned(policy, SHARED)


def render_binding(tier: str) -> Manifest:
    """Binds the tier's policy to gpucloud's namespaces of that tier, each with its own params."""
    spec = {
        "policyName": policy_name(tier),
        "paramRef": {"name": PARAMS, "parameterNotFoundAction": "Deny"},
        "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": {"matchLabels": {TRUST_TIER: tier, MANAGED_BY: MANAGER}}},
    }
    return owned(obj(API, "ValidatingAdmissionPolicyBinding", policy_name(tier), spec=spec), SHARED)


def render_shared(tenants: Sequence[TenantSpec], profile: ClusterProfile) -> list[Manifest]:
    """A policy and a binding for each tier some present tenant has; policies first."""
    tiers = [tier for tier in TIERS if any(t.trust_tier == tier for t in tenants)]
    claims = [render_claims_policy(), render_claims_binding()] if profile.dra and tenants else []
    return (
        [render_policy(tier, profile) for tier in tiers] + [render_binding(tier) for tier in tiers] + claims
    )


# --- DRA claims ------------------------------------------------------------------------------------------

CLAIMS_POLICY = "gpucloud-claims"
# A claim's requests, or a claim template's (its claims' spec under `spec.spec`); each request names its class
# directly (`exactly`) or per alternative (`firstAvailable`).
_CLAIM_REQUESTS = (
    "object.kind == 'ResourceClaimTemplate' ? "
    f"{_or_empty('object.spec.spec.devices.requests')} : {_or_empty('object.spec.devices.requests')}"
)
_CLASS_OK = _in_csv("{}", "params.data.deviceClasses")
_REQUEST_OK = (
    f"((!has(r.exactly) || {_CLASS_OK.format('r.exactly.deviceClassName')}) && "
    f"(!has(r.firstAvailable) || r.firstAvailable.all(s, {_CLASS_OK.format('s.deviceClassName')})))"
)
# The first class a refused request names that is not allowed (CEL has no `let`: map over a one-item list).
_OFFENDING_CLASS = (
    f"[variables.requests.filter(r, !{_REQUEST_OK})[0]].map(r, has(r.exactly) ? r.exactly.deviceClassName : "
    f"r.firstAvailable.filter(s, !{_CLASS_OK.format('s.deviceClassName')})[0].deviceClassName)[0]"
)


def render_claims_policy() -> Manifest:
    """On a DRA cluster: a claim or claim template in a tenant namespace names only the DeviceClasses of the
    classes the tenant holds (the params' `deviceClasses`). The ResourceQuota refuses the others too (0
    devices), but this refusal names the class and what is allowed, and comes when the template is synced,
    before a pod waits on a claim that can never be made. The host's own controllers are not judged: the
    resource claim controller makes claims from templates this policy has already admitted."""
    allowed = "(params.data.deviceClasses == '' ? '<none>' : params.data.deviceClasses)"
    spec: dict[str, Any] = {
        "failurePolicy": "Fail",
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": ["resource.k8s.io"],
                    "apiVersions": ["*"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["resourceclaims", "resourceclaimtemplates"],
                }
            ]
        },
        "matchConditions": [
            {
                "name": "not-a-host-controller",
                "expression": "!request.userInfo.username.startsWith('system:serviceaccount:kube-system:')",
            }
        ],
        "variables": [{"name": "requests", "expression": _CLAIM_REQUESTS}],
        "validations": [
            Rule(
                "device-class",
                f"variables.requests.all(r, {_REQUEST_OK})",
                f"object.kind + ' ' + object.metadata.name + ' asks for DeviceClass ' + {_OFFENDING_CLASS} + "
                "', which tenant ' + params.data.tenant + ' holds no quota for or its tier (' + "
                f"params.data.tier + ') does not allow; it may claim: ' + {allowed}",
            ).validation()
        ],
    }
    return owned(obj(API, "ValidatingAdmissionPolicy", CLAIMS_POLICY, spec=spec), SHARED)


def render_claims_binding() -> Manifest:
    """Binds the claims policy to every namespace gpucloud manages, each with its own params."""
    spec = {
        "policyName": CLAIMS_POLICY,
        "paramRef": {"name": PARAMS, "parameterNotFoundAction": "Deny"},
        "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": {"matchLabels": {MANAGED_BY: MANAGER}}},
    }
    return owned(obj(API, "ValidatingAdmissionPolicyBinding", CLAIMS_POLICY, spec=spec), SHARED)
