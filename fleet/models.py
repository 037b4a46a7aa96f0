"""The GPU catalog and the fleet: host clusters, their nodes and GPUs, with topology and health."""

from __future__ import annotations

import uuid
from datetime import datetime
from fractions import Fraction

from django.conf import settings
from django.db import models

from fleet import catalog
from gpucloud.errors import ValidationFailed
from gpucloud.ids import PublicIdField


class GpuModel(models.Model):
    """A GPU product (H200 141GB, A100 80GB …), synced from `fleet.catalog`."""

    slug = models.SlugField(max_length=40, unique=True)
    display_name = models.CharField(max_length=80)
    memory_gb = models.PositiveIntegerField()
    product_label = models.CharField(max_length=80, help_text="nvidia.com/gpu.product value")
    dcgm_model_names = models.JSONField(default=list, help_text="dcgm-exporter modelName values")
    mig_profiles = models.JSONField(
        default=list, help_text="[{name, compute_slices, memory_slices, memory_gb, max_count}]"
    )

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig_profiles)


class GpuClass(models.Model):
    """The unit quotas and prices are written in: a whole GPU, a MIG profile, or a shared fraction."""

    class Kind(models.TextChoices):
        WHOLE = catalog.WHOLE
        MIG = catalog.MIG
        SHARED = catalog.SHARED
        FRACTION = catalog.FRACTION

    name = models.CharField(max_length=60, unique=True)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="classes")
    mig_profile = models.CharField(max_length=20, blank=True)
    resource_name = models.CharField(max_length=80)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "GPU classes"

    def __str__(self) -> str:
        return self.name

    def _profile(self) -> dict[str, int]:
        return next(p for p in self.gpu_model.mig_profiles if p["name"] == self.mig_profile)

    @property
    def gpu_fraction(self) -> Fraction:
        """How much of one physical GPU one unit of this class takes (MIG: compute slices of 7)."""
        if self.kind == self.Kind.MIG:
            return Fraction(self._profile()["compute_slices"], catalog.COMPUTE_SLICES)
        if self.kind == self.Kind.SHARED:
            return Fraction(1, settings.SHARED_GPU_REPLICAS)
        if self.kind == self.Kind.FRACTION:
            return Fraction(catalog.hami_percent(self.name), 100)
        return Fraction(1)

    def units_per_gpu(self) -> int:
        """The most units of this class one GPU can give."""
        if self.kind == self.Kind.MIG:
            return self._profile()["max_count"]
        if self.kind == self.Kind.SHARED:
            return int(settings.SHARED_GPU_REPLICAS)
        if self.kind == self.Kind.FRACTION:
            return 100 // catalog.hami_percent(self.name)
        return 1


class HostCluster(models.Model):
    """A Kubernetes cluster with GPU nodes (driver `kubernetes`), or the built-in simulated fleet."""

    class Driver(models.TextChoices):
        SIMULATED = "simulated"
        KUBERNETES = "kubernetes"

    class Scheduler(models.TextChoices):
        KUEUE = "kueue"
        KAI = "kai"

    class State(models.TextChoices):
        READY = "ready"
        UNREACHABLE = "unreachable"
        ERROR = "error"
        RETIRED = "retired"  # drained and kept for its history: no tenants, no passes, no capacity

    public_id = PublicIdField(prefix="hc")
    name = models.SlugField(max_length=63, unique=True)
    region = models.CharField(max_length=63, blank=True)
    driver = models.CharField(max_length=20, choices=Driver.choices)
    scheduler = models.CharField(max_length=10, choices=Scheduler.choices, default=Scheduler.KUEUE)
    state = models.CharField(max_length=20, choices=State.choices, default=State.READY)
    status_message = models.TextField(blank=True)
    source = models.CharField(max_length=500, blank=True, help_text="fleet file of a simulated cluster")
    created_at = models.DateTimeField(auto_now_add=True)
    # Kubernetes host clusters only: how to reach it and what it runs.
    kubeconfig_ciphertext = models.TextField(blank=True, help_text="Fernet-encrypted kubeconfig; never shown")
    endpoint_base = models.CharField(
        max_length=300, blank=True, help_text="tenant API servers are served at https://<slug>.<this host>"
    )
    vcluster_mode = models.CharField(
        max_length=20, default="helmrelease", help_text="helmrelease (Flux) or platform (vCluster Platform)"
    )
    server_version = models.CharField(max_length=40, blank=True)
    addons = models.JSONField(default=dict, blank=True, help_text="add-ons discovered: kueue, kai, flux, …")
    topology_levels = models.JSONField(default=list, blank=True, help_text="node-label keys, outermost first")
    discovered_at = models.DateTimeField(null=True, blank=True)
    api_server_cidrs = models.JSONField(
        default=list,
        blank=True,
        help_text="the API server's addresses (`kubernetes` EndpointSlice): tenants' pods never reach them",
    )
    tenants_namespace = models.CharField(
        max_length=63,
        blank=True,
        help_text="namespace whose Tenant and RateCard custom resources gpucloud applies (--watch-tenants)",
    )
    # Re-checked every pass over a Kubernetes host cluster (clusters/drivers/conformance.py).
    conformance = models.JSONField(
        default=list,
        blank=True,
        help_text="capabilities gpucloud uses: found/missing, version, fallback, fix",
    )
    partitions = models.JSONField(
        default=dict, blank=True, help_text="the last partition pass: nodes waiting or failed, demand not met"
    )
    checked_at = models.DateTimeField(null=True, blank=True, help_text="when conformance was last checked")
    # Every GPU resource name the cluster offers (clusters/drivers/discovery.py `gpu_resources`), re-read
    # every pass: each tenant's ResourceQuota names all of them, 0 where the tenant holds none.
    gpu_resources = models.JSONField(
        default=list, blank=True, help_text="GPU resource names the nodes offer (whole, MIG, HAMi, DRA)"
    )
    # Cordoned: no new tenant is placed here (clusters/lifecycle.py); the tenants it has keep running.
    cordoned_at = models.DateTimeField(
        null=True, blank=True, help_text="when it was cordoned for new tenants"
    )
    cordon_reason = models.CharField(max_length=300, blank=True, help_text="why it takes no new tenants")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def cordoned(self) -> bool:
        return self.cordoned_at is not None

    @property
    def retired(self) -> bool:
        return self.state == self.State.RETIRED

    def mark(self, state: str, message: str = "") -> bool:
        """Record the cluster's reachability, writing only on change. Returns whether it changed.

        A retired cluster keeps its state: only un-retiring changes it (clusters/lifecycle.py). The write is
        conditional on the row, not on this copy, so a pass that read the cluster before it was retired and
        ends after cannot bring it back."""
        if (self.state, self.status_message) == (state, message) or self.retired:
            return False
        rows = HostCluster.objects.filter(pk=self.pk).exclude(state=self.State.RETIRED)
        if not rows.update(state=state, status_message=message):
            return False
        self.state, self.status_message = state, message
        return True


def host_cluster_named(name: str | None, field: str = "host_cluster") -> HostCluster | None:
    """The host cluster of that name (None for no name); an unknown name is a 400 listing the known ones."""
    if not name:
        return None
    host_cluster = HostCluster.objects.filter(name=name).first()
    if host_cluster is None:
        known = ", ".join(HostCluster.objects.values_list("name", flat=True)) or "none"
        raise ValidationFailed.on(field, f"there is no host cluster {name!r}; known: {known}")
    return host_cluster


class Node(models.Model):
    """A GPU server in a host cluster, with its place in the topology.

    `gone`: the node left the host cluster (the node sync, `clusters.node_sync`, no longer lists it). Its row,
    GPUs and everything that refers to them stay, as history; it is out of service until it comes back.
    """

    class State(models.TextChoices):
        READY = "ready"
        CORDONED = "cordoned"
        QUARANTINED = "quarantined"
        GONE = "gone"

    host_cluster = models.ForeignKey(HostCluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=253)
    zone = models.CharField(max_length=63, blank=True)
    block = models.CharField(max_length=63, blank=True)
    rack = models.CharField(max_length=63, blank=True)
    nvlink_domain = models.CharField(max_length=63, blank=True)
    cpu_milli = models.PositiveIntegerField(default=0)
    memory_mib = models.PositiveBigIntegerField(default=0)
    labels = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=20, choices=State.choices, default=State.READY)
    gone_at = models.DateTimeField(null=True, blank=True, help_text="when the node sync found it gone")
    # The state it had when it went (ready, cordoned, quarantined): what it gets back if it returns.
    state_before_gone = models.CharField(max_length=20, blank=True)

    class Meta:
        ordering = ["host_cluster", "name"]
        constraints = [models.UniqueConstraint(fields=["host_cluster", "name"], name="node_unique_name")]

    def __str__(self) -> str:
        return self.name

    def mark_gone(self, at: datetime) -> None:
        """The node left its cluster: out of service, its state kept for its return; the caller saves."""
        if self.state != self.State.GONE:
            self.state_before_gone, self.state, self.gone_at = self.state, self.State.GONE, at

    def mark_back(self) -> None:
        """The node is listed again: it gets back the state it left in; the caller saves."""
        if self.state == self.State.GONE:
            self.state, self.gone_at = self.state_before_gone or self.State.READY, None
            self.state_before_gone = ""


def placeholder_uuid(host_cluster_id: int, node: str, index: int) -> str:
    """The UUID a GPU imported from a host cluster has until DCGM shows its real one
    (`health.services.observe`)."""
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'gpucloud/{host_cluster_id}/{node}/{index}')}"


class Gpu(models.Model):
    """One physical GPU, known by the UUID NVML and DCGM report."""

    class Health(models.TextChoices):
        HEALTHY = "healthy"
        QUARANTINED = "quarantined"

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    uuid = models.CharField(max_length=80, unique=True)
    index = models.PositiveSmallIntegerField()
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="gpus")
    numa_node = models.PositiveSmallIntegerField(default=0)
    health = models.CharField(max_length=20, choices=Health.choices, default=Health.HEALTHY)

    class Meta:
        ordering = ["node", "index"]
        constraints = [models.UniqueConstraint(fields=["node", "index"], name="gpu_unique_index")]

    def __str__(self) -> str:
        return self.uuid


class Pod(models.Model):
    """A GPU pod of a host cluster: which GPUs (or which MIG instance, or what share) it holds, whose it is,
    and when it was created, scheduled, started and finished.

    One model for every host cluster: the simulator writes the pods it places with the placement engine
    (`simulator/workloads.py`), and the live view of a Kubernetes host cluster (`placement/live/`) writes the
    pods it lists and watches there. Everything that says "in use" reads these rows (`fleet/selectors.py`,
    the placement service, health), and billing takes the pods' exact edges from them. A row is written when
    a pod is bound to a node and holds a GPU; it stays, finished, as history. Kept compact: the devices as
    UUIDs and one share, no copy of the pod's spec.
    """

    class Phase(models.TextChoices):
        PENDING = "Pending"  # bound, containers not started yet: its GPUs are allocated all the same
        RUNNING = "Running"
        SUCCEEDED = "Succeeded"
        FAILED = "Failed"

    host_cluster = models.ForeignKey(HostCluster, on_delete=models.CASCADE, related_name="+")
    tenant = models.ForeignKey(
        "tenants.Tenant", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    uid = models.CharField(
        max_length=64, blank=True, help_text="metadata.uid on a Kubernetes host cluster; empty when simulated"
    )
    gpu_class = models.ForeignKey(GpuClass, on_delete=models.PROTECT, related_name="+")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="+")
    gpu_uuids = models.JSONField(
        default=list, help_text="physical GPUs held (the parent GPU for a MIG slice)"
    )
    gpu_instance_id = models.PositiveSmallIntegerField(null=True, blank=True, help_text="MIG GPU_I_ID")
    gpu_milli = models.PositiveIntegerField(default=1000, help_text="share of each GPU held, of 1000")
    phase = models.CharField(max_length=10, choices=Phase.choices, default=Phase.RUNNING)
    created_at = models.DateTimeField(null=True, blank=True, help_text="metadata.creationTimestamp")
    scheduled_at = models.DateTimeField(null=True, blank=True, help_text="bound to its node")
    started_at = models.DateTimeField(db_index=True, help_text="holds its GPUs from")
    finished_at = models.DateTimeField(null=True, blank=True, db_index=True, help_text="gave them back at")
    # Simulator bookkeeping (simulator/workloads.py); metering needs none of it.
    ends_at = models.DateTimeField(
        null=True, blank=True, help_text="when the simulator will end it; finished_at is set then"
    )
    mig_layout = models.JSONField(
        default=list, blank=True, help_text="MIG layout of its GPU; gpu_instance_id indexes it"
    )

    class Meta:
        # Once `SimulatedPod` of `workers`: the table kept its name through the move to `fleet` and the
        # rename, so neither changed any data.
        db_table = "workers_simulatedpod"
        constraints = [
            # A Kubernetes pod name comes back (a StatefulSet's, a Job's retry): its uid tells the two apart.
            models.UniqueConstraint(
                fields=["host_cluster", "namespace", "name", "uid"], name="pod_unique_name"
            )
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class PodWatch(models.Model):
    """Where the live view of a Kubernetes host cluster stands: the resourceVersion its pod watch resumes
    from, and when it last listed (the list that reconciles what a lost watch missed)."""

    host_cluster = models.OneToOneField(HostCluster, on_delete=models.CASCADE, related_name="pod_watch")
    resource_version = models.CharField(max_length=64, blank=True)
    listed_at = models.DateTimeField(null=True, blank=True)
    events = models.PositiveBigIntegerField(default=0, help_text="watch events applied since registration")
    synced_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="the view holds every pod event up to this time (last list, event or bookmark received)",
    )
    holder = models.CharField(
        max_length=200, blank=True, help_text="the process whose feed writes the view (host:pid:role)"
    )
    held_until = models.DateTimeField(
        null=True, blank=True, help_text="the holder's lease: another process may watch after this"
    )

    def __str__(self) -> str:
        return f"{self.host_cluster} @ {self.resource_version or 'unlisted'}"


class PendingWorkloadQuerySet(models.QuerySet["PendingWorkload"]):
    def in_queue_order(self) -> PendingWorkloadQuerySet:
        """The order a tenant's queue shows: the scheduler's position where it gives one (Kueue's
        visibility API), then higher priority, then earlier creation, then name (what KAI and Kueue order
        by otherwise)."""
        return self.order_by(
            models.F("position").asc(nulls_last=True),
            "-priority",
            models.F("created_at").asc(nulls_last=True),
            "name",
        )

    def ahead(self) -> list[tuple[GpuClass, int, str]]:
        """These waiting workloads of GPU classes gpucloud offers as (class, units, name), in queue order:
        what a feasibility ask goes behind (`placement.queue_estimate.feasibility`'s `ahead`)."""
        classes = {c.name: c for c in GpuClass.objects.select_related("gpu_model")}
        return [
            (classes[w.gpu_class], w.gpus, w.name) for w in self.in_queue_order() if w.gpu_class in classes
        ]


class PendingWorkload(models.Model):
    """A workload waiting for GPUs on a host cluster, as its scheduler reports it: the store a tenant's queue
    is read from (`clusters/queue.py`).

    Three writers, each replacing its own rows (by `source`) per pass and only when something changed: the
    reconciler from Kueue's pending `Workload` objects with their place in Kueue's visibility API
    (`kueue`), the reconciler from KAI Scheduler's `PodGroup` objects not yet scheduled (`kai`), and the
    simulator from the pods it could not place yet (`simulated`). A row is the workload as a whole: a gang of
    `pods` pods holds `gpus` units of `gpu_class` in all.
    """

    class Source(models.TextChoices):
        KUEUE = "kueue"
        KAI = "kai"
        SIMULATED = "simulated"

    host_cluster = models.ForeignKey(HostCluster, on_delete=models.CASCADE, related_name="+")
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    source = models.CharField(max_length=10, choices=Source.choices)
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    queue = models.CharField(max_length=253, blank=True, help_text="LocalQueue (Kueue) or queue (KAI)")
    gpu_class = models.CharField(max_length=100, blank=True, help_text="GPU class name; may be unknown")
    pods = models.PositiveIntegerField(default=1)
    gpus = models.PositiveIntegerField(help_text="GPU units asked for in all: pods × units per pod")
    priority = models.IntegerField(default=0, help_text="the scheduler's priority; higher goes first")
    position = models.PositiveIntegerField(
        null=True, blank=True, help_text="place in its queue by the scheduler's word (1 is next), if it says"
    )
    message = models.TextField(blank=True, help_text="why it waits, in the scheduler's own words")
    created_at = models.DateTimeField(null=True, blank=True)
    expected_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="how long it will run once started, where known (the simulator's)"
    )
    topology_level = models.CharField(max_length=20, blank=True, help_text="rack, block, …: a gang's ask")
    topology_required = models.BooleanField(default=False)

    objects = PendingWorkloadQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["host_cluster", "namespace", "name"], name="pending_workload_unique_name"
            )
        ]
        indexes = [models.Index(fields=["tenant", "source"], name="pending_workload_tenant")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} ({self.source})"


class NodePartition(models.Model):
    """How a node of a Kubernetes host cluster is partitioned, as gpucloud asked and as the node reports it.

    Written by the partition pass (clusters/partitions/gpu_pass.py) only when something changed. `advertised`
    holds the units per GPU class the node offers now; MIG slices count only once the MIG manager reported
    `success`.
    """

    class MigState(models.TextChoices):
        NONE = "", "not changed by gpucloud"
        PENDING = "pending"
        REBOOTING = "rebooting"
        SUCCESS = "success"
        FAILED = "failed"

    node = models.OneToOneField(Node, on_delete=models.CASCADE, related_name="partition")
    mig_config = models.CharField(max_length=80, blank=True, help_text="nvidia.com/mig.config on the node")
    mig_state = models.CharField(max_length=20, choices=MigState.choices, blank=True)
    layouts = models.JSONField(
        default=list, blank=True, help_text="MIG layout per GPU index ([] = whole GPU)"
    )
    sharing = models.BooleanField(default=False, help_text="time-sliced by gpucloud")
    advertised = models.JSONField(default=dict, blank=True, help_text="units per GPU class it offers now")
    busy = models.BooleanField(default=False, help_text="pods held its GPUs at the last pass")
    waiting = models.TextField(blank=True, help_text="why a change it needs is not made now")
    failures = models.PositiveIntegerField(default=0, help_text="MIG changes failed in a row")
    retry_at = models.DateTimeField(null=True, blank=True, help_text="when a failed change is tried again")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.node} {self.mig_config or 'whole'} {self.mig_state}"
