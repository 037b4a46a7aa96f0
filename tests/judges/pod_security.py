"""Pod Security admission, as the host cluster's API server applies it to a tenant's synced pods.

A port of the rules of the Pod Security Standards' checks in k8s.io/pod-security-admission (`policy/`, read
at kubernetes/pod-security-admission@8f84a87c, the staging mirror of kubernetes/kubernetes; Apache-2.0):
every baseline and restricted check with each of its versions, the restricted checks that replace baseline
ones, and upstream's order and wording of refusals. The level and version come from the pod's namespace's
`pod-security.kubernetes.io/enforce` and `enforce-version` labels as rendered; a namespace without the label
is `privileged` (the API server's default), and a missing version is `latest`.

Pods are manifests (dicts, camelCase fields) as vCluster creates them in the tenant's host namespace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from clusters.render.namespace import ENFORCE, ENFORCE_VERSION
from gpucloud.kube.meta import Manifest

from .world import World

Version = tuple[int, int]
Result = tuple[str, str] | None  # (reason, detail) when the check forbids the pod
CheckFn = Callable[[dict[str, Any], dict[str, Any]], Result]  # (metadata, spec) -> result

# The newest version of any check ported here (sysctls, v1.37): what `latest` means to this judge.
LATEST: Version = (1, 37)


def judge(pod: Manifest, world: World) -> list[str]:
    """The message with which Pod Security admission refuses `pod` in its namespace; empty: admitted."""
    namespace = pod["metadata"]["namespace"]
    labels: dict[str, str] = {}
    for ns in world.objects("Namespace"):
        if ns["metadata"]["name"] == namespace:
            labels = ns["metadata"].get("labels") or {}
    level = labels.get(ENFORCE, "privileged")
    version_label = labels.get(ENFORCE_VERSION, "latest")
    refusals = evaluate(pod, level, parse_version(version_label))
    if not refusals:
        return []
    reasons = ", ".join(f"{reason} ({detail})" if detail else reason for reason, detail in refusals)
    return [f'violates PodSecurity "{level}:{version_label}": {reasons}']


def evaluate(pod: Manifest, level: str, version: Version) -> list[tuple[str, str]]:
    """The (reason, detail) of each check of `level` at `version` forbidding the pod, in upstream's order."""
    if level == "privileged":
        return []
    if level not in ("baseline", "restricted"):
        raise ValueError(f"unknown Pod Security level {level!r}: privileged, baseline or restricted")
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    results = []
    for check_fn in _checks_for(level, version):
        result = check_fn(meta, spec)
        if result is not None:
            results.append(result)
    return results


def parse_version(label: str) -> Version:
    """`latest` or `v1.NN` (upstream refuses anything else, and so does this judge)."""
    if label == "latest":
        return LATEST
    major, _, minor = label.removeprefix("v").partition(".")
    if not label.startswith("v") or not major.isdigit() or not minor.isdigit():
        raise ValueError(f"invalid Pod Security version {label!r}: latest or v<major>.<minor>")
    return min((int(major), int(minor)), LATEST)


# --- the checks -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    id: str
    level: str
    versions: tuple[tuple[Version, CheckFn], ...]  # (minimum version, the check from then on), ascending
    overrides: tuple[str, ...] = ()  # baseline checks this restricted check replaces

    def at(self, version: Version) -> CheckFn | None:
        chosen = None
        for minimum, check_fn in self.versions:
            if minimum <= version:
                chosen = check_fn
        return chosen


def _checks_for(level: str, version: Version) -> list[CheckFn]:
    """policy/registry.go: baseline checks by ID, then restricted ones; a restricted check in force at the
    version drops the baseline checks it overrides."""
    active = {c.id: c for c in CHECKS if c.at(version) is not None}
    if level == "baseline":
        active = {i: c for i, c in active.items() if c.level == "baseline"}
    overridden = {o for c in active.values() if c.level == "restricted" for o in c.overrides}
    ordered = sorted(i for i, c in active.items() if c.level == "baseline" and i not in overridden)
    ordered += sorted(i for i, c in active.items() if c.level == "restricted")
    return [fn for i in ordered if (fn := active[i].at(version)) is not None]


def _containers(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """policy/visitor.go: init containers, containers, ephemeral containers."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key) or []


def _context(container: dict[str, Any]) -> dict[str, Any]:
    return container.get("securityContext") or {}


def _pod_context(spec: dict[str, Any]) -> dict[str, Any]:
    return spec.get("securityContext") or {}


def _plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def _quote(items: list[str]) -> str:
    return '"' + '", "'.join(items) + '"' if items else ""


def _named(containers: list[str]) -> str:
    return f"{_plural('container', 'containers', len(containers))} {_quote(containers)}"


def _setters(pod: bool, containers: list[str]) -> str:
    """ "pod", `container "a"`, `pod and containers "a", "b"` — who set a forbidden value."""
    return " and ".join((["pod"] if pod else []) + ([_named(containers)] if containers else []))


def _user_namespace(spec: dict[str, Any]) -> bool:
    """policy/helpers.go relaxPolicyForUserNamespacePod: the pod runs in a user namespace."""
    return spec.get("hostUsers") is False


def _windows(spec: dict[str, Any]) -> bool:
    return ((spec.get("os") or {}).get("name")) == "windows"


# policy/check_appArmorProfile.go
def app_armor_profile(meta: dict[str, Any], spec: dict[str, Any]) -> Result:
    allowed_types = ("RuntimeDefault", "Localhost")
    bad_values: set[str] = set()
    pod_profile = _pod_context(spec).get("appArmorProfile")
    pod_bad = pod_profile is not None and pod_profile.get("type") not in allowed_types
    if pod_bad:
        bad_values.add(str(pod_profile.get("type")))
    bad = []
    for c in _containers(spec):
        profile = _context(c).get("appArmorProfile")
        if profile is not None and profile.get("type") not in allowed_types:
            bad.append(c["name"])
            bad_values.add(str(profile.get("type")))
    prefix = "container.apparmor.security.beta.kubernetes.io/"
    annotations = sorted(
        f'{key}="{value}"'
        for key, value in (meta.get("annotations") or {}).items()
        if key.startswith(prefix)
        and value
        and value != "runtime/default"
        and not value.startswith("localhost/")
    )
    values = sorted(bad_values) + annotations
    setters = [s for s in (_setters(pod_bad, bad),) if s]
    if annotations:
        setters.append(_plural("annotation", "annotations", len(annotations)))
    if not setters:
        return None
    reason = _plural("forbidden AppArmor profile", "forbidden AppArmor profiles", len(values))
    return reason, f"{' and '.join(setters)} must not set AppArmor profile type to {_quote(values)}"


BASELINE_CAPABILITIES = {
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
}


# policy/check_capabilities_baseline.go
def capabilities_baseline(meta: dict[str, Any], spec: dict[str, Any]) -> Result:
    bad, added = [], set()
    for c in _containers(spec):
        extra = [
            cap
            for cap in (_context(c).get("capabilities") or {}).get("add") or []
            if cap not in BASELINE_CAPABILITIES
        ]
        if extra:
            bad.append(c["name"])
            added.update(extra)
    if not bad:
        return None
    return (
        "non-default capabilities",
        f"{_named(bad)} must not include {_quote(sorted(added))} in securityContext.capabilities.add",
    )


# policy/check_hostNamespaces.go
def host_namespaces(meta: dict[str, Any], spec: dict[str, Any]) -> Result:
    shared = [f"{key}=true" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key)]
    return ("host namespaces", ", ".join(shared)) if shared else None


# policy/check_hostPathVolumes.go
def host_path_volumes(meta: dict[str, Any], spec: dict[str, Any]) -> Result:
    names = [v["name"] for v in spec.get("volumes") or [] if v.get("hostPath") is not None]
    return (
        ("hostPath volumes", f"{_plural('volume', 'volumes', len(names))} {_quote(names)}") if names else None
    )


# policy/check_hostPorts.go
def host_ports(meta: dict[str, Any], spec: dict[str, Any]) -> Result:
    bad, ports = [], set[str]()
    for c in _containers(spec):
        used = [p["hostPort"] for p in c.get("ports") or [] if p.get("hostPort")]
        if used:
            bad.append(c["name"])
            ports.update(str(p) for p in used)
    if not bad:
        return None
    uses = _plural("uses", "use", len(bad))
    return (
        "hostPort",
        f"{_named(bad)} {uses} {_plural('hostPort', 'hostPorts', len(ports))} {', '.join(sorted(ports))}",
    )


# policy/check_hostProbesAndhostLifecycle.go (v1.34+)
def host_probes_and_lifecycle(meta: dict[str, Any], spec: dict[str, Any]) -> Result:
    bad, hosts = set(), set()
    for c in _containers(spec):
        handlers = [c.get(probe) for probe in ("livenessProbe", "readinessProbe", "startupProbe")]
        handlers += [(c.get("lifecycle") or {}).get(hook) for hook in ("postStart", "preStop")]
        for handler in handlers:
            for action in ("httpGet", "tcpSocket"):
                host = ((handler or {}).get(action) or {}).get("host")
                if host:
                    bad.add(c["name"])
                    hosts.add(host)
    if not bad:
        return None
    uses = _plural("uses", "use", len(bad))
    what = _plural("probe or lifecycle host", "probe or lifecycle hosts", len(hosts))
    return "probe or lifecycle host", f"{_named(sorted(bad))} {uses} {what} {_quote(sorted(hosts))}"


# policy/check_privileged.go
def privileged(meta: dict[str, Any], spec: dict[str, Any]) -> Result:
    bad = [c["name"] for c in _containers(spec) if _context(c).get("privileged") is True]
    return ("privileged", f"{_named(bad)} must not set securityContext.privileged=true") if bad else None


# policy/check_procMount_baseline.go procMount_1_0 (and check_procMount_restricted.go, which reuses it)
def proc_mount(meta: dict[str, Any], spec: dict[str, Any]) -> Result:
    bad, types = [], set()
    for c in _containers(spec):
        value = _context(c).get("procMount")
        if value is not None and value != "Default":
            bad.append(c["name"])
            types.add(value)
    if not bad:
        return None
    return "procMount", f"{_named(bad)} must not set securityContext.procMount to {_quote(sorted(types))}"


# policy/check_procMount_baseline.go (v1.35+): any procMount in a user namespace
def proc_mount_baseline_1_35(meta: dict[str, Any], spec: dict[str, Any]) -> Result:
    return None if _user_namespace(spec) else proc_mount(meta, spec)


SELINUX_TYPES_1_0 = {"", "container_t", "container_init_t", "container_kvm_t"}
SELINUX_TYPES_1_31 = SELINUX_TYPES_1_0 | {"container_engine_t"}


# policy/check_seLinuxOptions.go
def se_linux_options(allowed: set[str]) -> CheckFn:
    def check(meta: dict[str, Any], spec: dict[str, Any]) -> Result:
        bad_types: set[str] = set()
        set_user = set_role = False

        def valid(options: dict[str, Any]) -> bool:
            nonlocal set_user, set_role
            ok = True
            if options.get("type", "") not in allowed:
                bad_types.add(options.get("type", ""))
                ok = False
            if options.get("user"):
                set_user, ok = True, False
            if options.get("role"):
                set_role, ok = True, False
            return ok

        pod_options = _pod_context(spec).get("seLinuxOptions")
        pod_bad = pod_options is not None and not valid(pod_options)
        bad = [
            c["name"]
            for c in _containers(spec)
            if (o := _context(c).get("seLinuxOptions")) is not None and not valid(o)
        ]
        if not pod_bad and not bad:
            return None
        data = (
            [f"{_plural('type', 'types', len(bad_types))} {_quote(sorted(bad_types))}"] if bad_types else []
        )
        data += ["user may not be set"] if set_user else []
        data += ["role may not be set"] if set_role else []
        return (
            "seLinuxOptions",
            f"{_setters(pod_bad, bad)} set forbidden securityContext.seLinuxOptions: {'; '.join(data)}",
        )

    return check


def _valid_seccomp(profile: dict[str, Any]) -> bool:
    return profile.get("type") in ("RuntimeDefault", "Localhost")


# policy/check_seccompProfile_baseline.go seccompProfileBaseline_1_0: the alpha annotations
def seccomp_annotations(meta: dict[str, Any], spec: dict[str, Any]) -> Result:
    annotations = meta.get("annotations") or {}
    keys = ["seccomp.security.alpha.kubernetes.io/pod"]
    keys += [f"container.seccomp.security.alpha.kubernetes.io/{c['name']}" for c in _containers(spec)]
    forbidden = sorted(
        f'{key}="{annotations[key]}"'
        for key in set(keys)
        if key in annotations
        and not (
            annotations[key] in ("runtime/default", "docker/default")
            or annotations[key].startswith("localhost/")
        )
    )
    if not forbidden:
        return None
    return (
        "seccompProfile",
        f"forbidden {_plural('annotation', 'annotations', len(forbidden))} {', '.join(forbidden)}",
    )


# policy/check_seccompProfile_baseline.go seccompProfileBaseline_1_19: never Unconfined
def seccomp_baseline(meta: dict[str, Any], spec: dict[str, Any]) -> Result:
    values: set[str] = set()
    pod_profile = _pod_context(spec).get("seccompProfile")
    pod_bad = pod_profile is not None and not _valid_seccomp(pod_profile)
    if pod_bad:
        values.add(str(pod_profile.get("type")))
    bad = []
    for c in _containers(spec):
        profile = _context(c).get("seccompProfile")
        if profile is not None and not _valid_seccomp(profile):
            bad.append(c["name"])
            values.add(str(profile.get("type")))
    if not pod_bad and not bad:
        return None
    return (
        "seccompProfile",
        f"{_setters(pod_bad, bad)} must not set securityContext.seccompProfile.type to "
        f"{_quote(sorted(values))}",
    )


SYSCTLS_1_0 = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
}
SYSCTLS_1_27 = SYSCTLS_1_0 | {"net.ipv4.ip_local_reserved_ports"}
SYSCTLS_1_29 = SYSCTLS_1_27 | {
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
SYSCTLS_1_32 = SYSCTLS_1_29 | {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}
SYSCTLS_1_37 = SYSCTLS_1_32 | {"net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat"}


# policy/check_sysctls.go
def sysctls(allowed: set[str]) -> CheckFn:
    def check(meta: dict[str, Any], spec: dict[str, Any]) -> Result:
        names = [s.get("name", "") for s in _pod_context(spec).get("sysctls") or []]
        forbidden = [name for name in names if name not in allowed]
        return ("forbidden sysctls", ", ".join(forbidden)) if forbidden else None

    return check


# policy/check_windowsHostProcess.go
def windows_host_process(meta: dict[str, Any], spec: dict[str, Any]) -> Result:
    def host_process(context: dict[str, Any]) -> bool:
        return (context.get("windowsOptions") or {}).get("hostProcess") is True

    pod_bad = host_process(_pod_context(spec))
    bad = [c["name"] for c in _containers(spec) if host_process(_context(c))]
    if not pod_bad and not bad:
        return None
    return (
        "hostProcess",
        f"{_setters(pod_bad, bad)} must not set securityContext.windowsOptions.hostProcess=true",
    )


# policy/check_allowPrivilegeEscalation.go
def allow_privilege_escalation(meta: dict[str, Any], spec: dict[str, Any]) -> Result:
    bad = [c["name"] for c in _containers(spec) if _context(c).get("allowPrivilegeEscalation") is not False]
    if not bad:
        return None
    return (
        "allowPrivilegeEscalation != false",
        f"{_named(bad)} must set securityContext.allowPrivilegeEscalation=false",
    )


# policy/check_capabilities_restricted.go
def capabilities_restricted(meta: dict[str, Any], spec: dict[str, Any]) -> Result:
    missing_drop, adding, forbidden = [], [], set()
    for c in _containers(spec):
        capabilities = _context(c).get("capabilities")
        if capabilities is None:
            missing_drop.append(c["name"])
            continue
        if "ALL" not in (capabilities.get("drop") or []):
            missing_drop.append(c["name"])
        extra = [cap for cap in capabilities.get("add") or [] if cap != "NET_BIND_SERVICE"]
        if extra:
            adding.append(c["name"])
            forbidden.update(extra)
    details = []
    if missing_drop:
        details.append(f'{_named(missing_drop)} must set securityContext.capabilities.drop=["ALL"]')
    if adding:
        details.append(
            f"{_named(adding)} must not include {_quote(sorted(forbidden))} "
            "in securityContext.capabilities.add"
        )
    return ("unrestricted capabilities", "; ".join(details)) if details else None


RESTRICTED_VOLUME_SOURCES = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
)
# Upstream's names for the other volume sources, in the order it looks for them.
OTHER_VOLUME_SOURCES = (
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
)
STORAGEOS = "storageos"


# policy/check_restrictedVolumes.go
def restricted_volumes(meta: dict[str, Any], spec: dict[str, Any]) -> Result:
    bad, types = [], set()
    for volume in spec.get("volumes") or []:
        if any(volume.get(source) is not None for source in RESTRICTED_VOLUME_SOURCES):
            continue
        bad.append(volume["name"])
        found = next((s for s in OTHER_VOLUME_SOURCES if volume.get(s) is not None), None)
        types.add(found or (STORAGEOS if volume.get(STORAGEOS) is not None else "unknown"))
    if not bad:
        return None
    uses = _plural("uses", "use", len(bad))
    what = _plural("restricted volume type", "restricted volume types", len(types))
    return (
        "restricted volume types",
        f"{_plural('volume', 'volumes', len(bad))} {_quote(bad)} {uses} {what} {_quote(sorted(types))}",
    )


# policy/check_runAsNonRoot.go runAsNonRoot1_0
def run_as_non_root(meta: dict[str, Any], spec: dict[str, Any]) -> Result:
    pod_value = _pod_context(spec).get("runAsNonRoot")
    pod_bad = pod_value is False
    explicit, implicit = [], []
    for c in _containers(spec):
        value = _context(c).get("runAsNonRoot")
        if value is False:
            explicit.append(c["name"])
        elif value is None and pod_value is not True:
            implicit.append(c["name"])
    if pod_bad or explicit:
        return (
            "runAsNonRoot != true",
            f"{_setters(pod_bad, explicit)} must not set securityContext.runAsNonRoot=false",
        )
    if implicit:
        return "runAsNonRoot != true", f"pod or {_named(implicit)} must set securityContext.runAsNonRoot=true"
    return None


# policy/check_runAsUser.go runAsUser1_23
def run_as_user(meta: dict[str, Any], spec: dict[str, Any]) -> Result:
    pod_bad = _pod_context(spec).get("runAsUser") == 0
    bad = [c["name"] for c in _containers(spec) if _context(c).get("runAsUser") == 0]
    if not pod_bad and not bad:
        return None
    return "runAsUser=0", f"{_setters(pod_bad, bad)} must not set runAsUser=0"


# policy/check_seccompProfile_restricted.go seccompProfileRestricted_1_19
def seccomp_restricted(meta: dict[str, Any], spec: dict[str, Any]) -> Result:
    values: set[str] = set()
    pod_profile = _pod_context(spec).get("seccompProfile")
    pod_bad = pod_profile is not None and not _valid_seccomp(pod_profile)
    pod_set = pod_profile is not None and not pod_bad
    if pod_bad:
        values.add(str(pod_profile.get("type")))
    explicit, implicit = [], []
    for c in _containers(spec):
        profile = _context(c).get("seccompProfile")
        if profile is not None:
            if not _valid_seccomp(profile):
                explicit.append(c["name"])
                values.add(str(profile.get("type")))
        elif not pod_set:
            implicit.append(c["name"])
    if pod_bad or explicit:
        return (
            "seccompProfile",
            f"{_setters(pod_bad, explicit)} must not set securityContext.seccompProfile.type to "
            f"{_quote(sorted(values))}",
        )
    if implicit:
        return (
            "seccompProfile",
            f"pod or {_named(implicit)} must set securityContext.seccompProfile.type to "
            '"RuntimeDefault" or "Localhost"',
        )
    return None


def _unless(condition: Callable[[dict[str, Any]], bool], check_fn: CheckFn) -> CheckFn:
    """A later version of a check that lets pods matching `condition` (Windows pods, user namespaces) pass."""

    def check(meta: dict[str, Any], spec: dict[str, Any]) -> Result:
        return None if condition(spec) else check_fn(meta, spec)

    return check


CHECKS = (
    Check("appArmorProfile", "baseline", (((1, 0), app_armor_profile),)),
    Check("capabilities_baseline", "baseline", (((1, 0), capabilities_baseline),)),
    Check("hostNamespaces", "baseline", (((1, 0), host_namespaces),)),
    Check("hostPathVolumes", "baseline", (((1, 0), host_path_volumes),)),
    Check("hostPorts", "baseline", (((1, 0), host_ports),)),
    Check("hostProbesAndHostLifecycle", "baseline", (((1, 34), host_probes_and_lifecycle),)),
    Check("privileged", "baseline", (((1, 0), privileged),)),
    Check("procMount", "baseline", (((1, 0), proc_mount), ((1, 35), proc_mount_baseline_1_35))),
    Check(
        "seLinuxOptions",
        "baseline",
        (((1, 0), se_linux_options(SELINUX_TYPES_1_0)), ((1, 31), se_linux_options(SELINUX_TYPES_1_31))),
    ),
    Check(
        "seccompProfile_baseline", "baseline", (((1, 0), seccomp_annotations), ((1, 19), seccomp_baseline))
    ),
    Check(
        "sysctls",
        "baseline",
        (
            ((1, 0), sysctls(SYSCTLS_1_0)),
            ((1, 27), sysctls(SYSCTLS_1_27)),
            ((1, 29), sysctls(SYSCTLS_1_29)),
            ((1, 32), sysctls(SYSCTLS_1_32)),
            ((1, 37), sysctls(SYSCTLS_1_37)),
        ),
    ),
    Check("windowsHostProcess", "baseline", (((1, 0), windows_host_process),)),
    Check(
        "allowPrivilegeEscalation",
        "restricted",
        (((1, 8), allow_privilege_escalation), ((1, 25), _unless(_windows, allow_privilege_escalation))),
    ),
    Check(
        "capabilities_restricted",
        "restricted",
        (((1, 22), capabilities_restricted), ((1, 25), _unless(_windows, capabilities_restricted))),
        overrides=("capabilities_baseline",),
    ),
    Check("procMount_restricted", "restricted", (((1, 35), proc_mount),), overrides=("procMount",)),
    Check("restrictedVolumes", "restricted", (((1, 0), restricted_volumes),), overrides=("hostPathVolumes",)),
    Check(
        "runAsNonRoot",
        "restricted",
        (((1, 0), run_as_non_root), ((1, 35), _unless(_user_namespace, run_as_non_root))),
    ),
    Check(
        "runAsUser", "restricted", (((1, 23), run_as_user), ((1, 35), _unless(_user_namespace, run_as_user)))
    ),
    Check(
        "seccompProfile_restricted",
        "restricted",
        (((1, 19), seccomp_restricted), ((1, 25), _unless(_windows, seccomp_restricted))),
        overrides=("seccompProfile_baseline",),
    ),
)
