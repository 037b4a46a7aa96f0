"""What the host cluster says of its pods, beside DCGM, for a metering round: each pod's exact start and
finish, its class, and its declared share of a GPU — read from the `fleet.Pod` rows, which the simulator
writes for the simulated fleet and the live view (`placement/live/`) for a Kubernetes host cluster.

With these facts a pod DCGM sees is billed from the second it started to the second it finished instead
of from the middle of the scrape interval around each edge (`billing.metering`, rule 3), and a pod that
started and finished between two scrapes, so in no sample, is billed its lifetime on the GPU or MIG instance
it held where nobody held it at either scrape, or its declared fraction of a shared GPU where that fits beside
the holders DCGM saw (rule 3b).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from django.db.models import Q

from billing.metering import PodLifecycle, Unseen
from billing.services.ingest import ClusterFacts
from fleet import catalog
from fleet.models import HostCluster, Pod


def pod_facts(host_cluster: HostCluster, at: datetime, window: float) -> ClusterFacts:
    """The facts of the pods running at `at` or finished within `window` seconds before it."""
    since = at - timedelta(seconds=window)
    pods = (
        Pod.objects.filter(host_cluster=host_cluster, started_at__lte=at)
        .filter(Q(finished_at__isnull=True) | Q(finished_at__gte=since))
        .values_list(
            "namespace",
            "name",
            "started_at",
            "finished_at",
            "gpu_class__name",
            "gpu_class__kind",
            "gpu_class__mig_profile",
            "gpu_milli",
            "gpu_uuids",
            "gpu_instance_id",
        )
    )
    lifecycle, fractions, classes = {}, {}, {}
    unseen: dict[str, list[Unseen]] = defaultdict(list)
    for namespace, name, started, finished, class_name, kind, profile, milli, uuids, instance in pods:
        ref = (namespace, name)
        lifecycle[ref] = PodLifecycle(started.timestamp(), finished.timestamp() if finished else None)
        classes[ref] = class_name
        share = kind in (catalog.SHARED, catalog.FRACTION)
        if share:  # a HAMi pod or a share: its declared fraction
            fractions[ref] = milli / 1000
        # Billed even if it lived between two scrapes (a MIG pod only on the instance the view gave it).
        if finished is not None and (instance is not None or not profile):
            fraction = milli / 1000 if share else None
            gi = str(instance) if instance is not None else None  # as DCGM's GPU_I_ID label reads
            ghost = Unseen(
                namespace, name, started.timestamp(), finished.timestamp(), fraction, gi, profile or None
            )
            for uuid in uuids:
                unseen[uuid].append(ghost)
    return ClusterFacts(lifecycle=lifecycle, unseen=dict(unseen), fractions=fractions, classes=classes)
