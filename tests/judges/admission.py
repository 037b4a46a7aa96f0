"""The admission layer: what the API server's ValidatingAdmissionPolicy plugin would answer for a pod.

It evaluates the ValidatingAdmissionPolicies and bindings gpucloud rendered (`world.rendered`) with a real CEL
runtime, Google's cel-cpp through `cel-expr-python`, following the plugin's dispatch
(k8s.io/apiserver/pkg/admission/plugin/policy/validating, Kubernetes 1.32–1.34):

1. every binding whose policy exists, whose policy's `matchConstraints` and whose own `matchResources` match
   the request (resource rules, then namespaceSelector against the namespace object, objectSelector);
2. its params (`paramRef` by name, in the request's namespace when the ref names none); none found with
   `parameterNotFoundAction: Deny` refuses, with `Allow` the binding is skipped;
3. the policy's `matchConditions` (all must be true; an error is a failure);
4. its `validations` in order, with `variables` evaluated as they are referenced: a false one refuses with its
   `messageExpression` (else `message`), an error is a failure; a failure refuses under `failurePolicy: Fail`;
5. only bindings with `validationActions` containing Deny refuse.

The CEL environment declares the variables the plugin declares (`object`, `oldObject`, `params`,
`namespaceObject`, `request`, `variables`; all dynamically typed here) and `KUBERNETES_LIBRARIES`, the
Kubernetes CEL libraries gpucloud's policies use: none. The policies keep to standard CEL and its macros, so
any call to a Kubernetes extension function (`split`, `quantity`, `matches`…) fails to compile here and fails
the suite, instead of being guessed at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from cel_expr_python import cel

from clusters.render import ClusterProfile, Manifest
from tests.judges.world import World

# Kubernetes' CEL libraries (k8s.io/apiserver/pkg/cel/library: lists, regex, urls, quantity, ip/cidr, format,
# ext strings, optionals…) that the rendered policies rely on. None: the judge provides no extension, so an
# expression calling one does not compile (see the module docstring).
KUBERNETES_LIBRARIES: tuple[cel.CelExtensionBase, ...] = ()
VARIABLES = ("object", "oldObject", "params", "namespaceObject", "request", "variables")


@cache
def _env() -> cel.Env:
    variables = dict.fromkeys(VARIABLES, cel.Type.DYN)
    return cel.NewEnv(variables=variables, extensions=list(KUBERNETES_LIBRARIES))


@cache
def _compiled(expression: str) -> cel.Expression:
    """Compiled (parsed and type-checked) once; a syntax error or an undeclared function raises."""
    return _env().compile(expression)


class CelError(Exception):
    """An expression that evaluated to an error (a missing key, a type mismatch…)."""


def evaluate(expression: str, data: dict[str, Any]) -> Any:
    """The plain Python value of `expression`; CelError when CEL answers an error value."""
    value = _compiled(expression).eval(data=data)
    if value.type() == cel.Type.ERROR:
        raise CelError(f"{expression[:80]}…: {value.plain_value()}")
    return value.plain_value()


@dataclass(frozen=True)
class Request:
    """The parts of an AdmissionRequest the policies read (`request` in CEL)."""

    operation: str = "CREATE"
    sub_resource: str = ""
    username: str = ""  # default: the tenant's vCluster syncer's ServiceAccount
    # The object's kind: a pod unless told (DRA claims: resource.k8s.io, v1, resourceclaims, ResourceClaim).
    group: str = ""
    version: str = "v1"
    resource: str = "pods"
    kind: str = "Pod"

    @classmethod
    def for_claim(cls, manifest: Manifest, **kwargs: Any) -> Request:
        """A request creating a DRA ResourceClaim or ResourceClaimTemplate (`manifest`'s kind)."""
        kind = manifest["kind"]
        return cls(group="resource.k8s.io", resource=f"{kind.lower()}s", kind=kind, **kwargs)

    def as_cel(self, pod: Manifest) -> dict[str, Any]:
        namespace = pod["metadata"]["namespace"]
        username = (
            self.username or f"system:serviceaccount:{namespace}:vc-{namespace.removeprefix('tenant-')}"
        )
        return {
            "kind": {"group": self.group, "version": self.version, "kind": self.kind},
            "resource": {"group": self.group, "version": self.version, "resource": self.resource},
            "subResource": self.sub_resource,
            "name": pod["metadata"].get("name", ""),
            "namespace": namespace,
            "operation": self.operation,
            "userInfo": {"username": username, "groups": ["system:serviceaccounts"]},
            "dryRun": False,
        }


def judge(pod: Manifest, world: World) -> list[str]:
    """The messages with which admission refuses creating `pod` in its namespace; empty when it admits it."""
    return review(pod, world, Request())


def _stored_world(stored: list[Manifest]) -> World:
    kinds = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ConfigMap", "Namespace")
    return World(ClusterProfile(), (), tuple(o for o in stored if o.get("kind") in kinds))


def admit_stored(pod: Manifest, stored: list[Manifest]) -> list[str]:
    """Admission over the objects an API server stand-in stores (`KubeEmulator.pod_admission`)."""
    return judge(pod, _stored_world(stored))


def admit_stored_claim(manifest: Manifest, stored: list[Manifest]) -> list[str]:
    """The same for a DRA ResourceClaim or ResourceClaimTemplate (`KubeEmulator.claim_admission`)."""
    return review(manifest, _stored_world(stored), Request.for_claim(manifest))


def review(pod: Manifest, world: World, request: Request, old: Manifest | None = None) -> list[str]:
    """Every refusal of every binding that applies to this request."""
    namespace = _namespace(world, pod["metadata"]["namespace"])
    data = {
        "object": pod,
        "oldObject": old,
        "namespaceObject": namespace,
        "request": request.as_cel(pod),
    }
    policies = {p["metadata"]["name"]: p for p in world.objects("ValidatingAdmissionPolicy")}
    refusals: list[str] = []
    for binding in world.objects("ValidatingAdmissionPolicyBinding"):
        policy = policies.get(binding["spec"]["policyName"])
        if policy is None or "Deny" not in binding["spec"].get("validationActions", []):
            continue
        if not _matches(policy["spec"].get("matchConstraints") or {}, request, pod, namespace):
            continue
        if not _matches(binding["spec"].get("matchResources") or {}, request, pod, namespace):
            continue
        prefix = (
            f"ValidatingAdmissionPolicy '{policy['metadata']['name']}' with binding "
            f"'{binding['metadata']['name']}' denied request: "
        )
        refusals += [prefix + m for m in _evaluate(policy, binding, world, {**data})]
    return refusals


def _namespace(world: World, name: str) -> Manifest:
    for ns in world.objects("Namespace"):
        if ns["metadata"]["name"] == name:
            return ns
    raise KeyError(f"namespace {name!r} was not rendered")


def _evaluate(policy: Manifest, binding: Manifest, world: World, data: dict[str, Any]) -> list[str]:
    spec = policy["spec"]
    fail = spec.get("failurePolicy", "Fail") == "Fail"
    if spec.get("paramKind"):
        params = _params(spec["paramKind"], binding["spec"].get("paramRef") or {}, world, data)
        if params is None:
            action = (binding["spec"].get("paramRef") or {}).get("parameterNotFoundAction", "Deny")
            return (
                ["no params found for policy binding with `Deny` parameterNotFoundAction"]
                if action == "Deny"
                else []
            )
        data["params"] = params
    else:
        data["params"] = None
    try:
        for condition in spec.get("matchConditions") or []:
            if evaluate(condition["expression"], {**data, "variables": {}}) is not True:
                return []
    except CelError as exc:
        return [f"matchCondition failed: {exc}"] if fail else []
    data["variables"] = _variables(spec.get("variables") or [], data)
    messages: list[str] = []
    for validation in spec.get("validations") or []:
        try:
            if evaluate(validation["expression"], data) is True:
                continue
        except CelError as exc:
            if fail:
                messages.append(f"expression '{validation['expression'][:60]}…' resulted in error: {exc}")
            continue
        messages.append(_message(validation, data))
    return messages


def _variables(declared: list[dict[str, str]], data: dict[str, Any]) -> dict[str, Any]:
    """Each variable's value; one that errors is left out, so an expression referring to it errors too (the
    plugin evaluates variables lazily: an error matters only where the variable is used)."""
    values: dict[str, Any] = {}
    for variable in declared:
        try:
            values[variable["name"]] = evaluate(variable["expression"], {**data, "variables": values})
        except CelError:
            continue
    return values


def _message(validation: dict[str, str], data: dict[str, Any]) -> str:
    """The messageExpression's value; like the plugin, `message` (or the expression) when it fails."""
    if "messageExpression" in validation:
        try:
            message = evaluate(validation["messageExpression"], data)
            if isinstance(message, str) and message.strip() and "\n" not in message:
                return message
        except CelError:
            pass
    return validation.get("message") or f"failed expression: {validation['expression']}"


def _params(kind: dict[str, str], ref: dict[str, Any], world: World, data: dict[str, Any]) -> Manifest | None:
    if "selector" in ref:
        raise NotImplementedError("paramRef.selector: gpucloud's bindings name their params")
    namespace = ref.get("namespace") or data["request"]["namespace"]
    for candidate in world.objects(kind["kind"], namespace):
        if candidate["apiVersion"] == kind["apiVersion"] and candidate["metadata"]["name"] == ref["name"]:
            return candidate
    return None


def _matches(resources: dict[str, Any], request: Request, pod: Manifest, namespace: Manifest) -> bool:
    """matchConstraints / matchResources: resource rules, namespaceSelector, objectSelector."""
    rules = resources.get("resourceRules")
    if rules is not None and not any(_rule_matches(rule, request) for rule in rules):
        return False
    if any(_rule_matches(rule, request) for rule in resources.get("excludeResourceRules") or []):
        return False
    labels = namespace["metadata"].get("labels") or {}
    if not selects(resources.get("namespaceSelector") or {}, labels):
        return False
    return selects(resources.get("objectSelector") or {}, pod["metadata"].get("labels") or {})


def _rule_matches(rule: dict[str, Any], request: Request) -> bool:
    resource = request.resource + (f"/{request.sub_resource}" if request.sub_resource else "")

    def has(field: str, value: str) -> bool:
        values = rule.get(field) or []
        return "*" in values or value in values

    return (
        has("operations", request.operation)
        and has("apiGroups", request.group)
        and has("apiVersions", request.version)
        and (
            has("resources", resource)
            or (bool(request.sub_resource) and has("resources", f"{request.resource}/*"))
        )
    )


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector (matchLabels and matchExpressions) against labels; the empty one selects all."""
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not ok:
            return False
    return True


def rule_of(message: str) -> str:
    """The gpucloud rule a refusal names (`…denied request: node-name: …` → `node-name`)."""
    match = re.search(r"denied request: ([a-z-]+): ", message)
    return match.group(1) if match else ""
