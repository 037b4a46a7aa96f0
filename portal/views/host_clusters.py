"""Platform › host clusters: update (kubeconfig rotation, scheduler, watched namespace), cordon and
uncordon, drain, retire and un-retire, and delete, each as its API route does it (clusters/lifecycle.py),
with a message saying what happened."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from clusters import lifecycle
from fleet.models import HostCluster, host_cluster_named
from gpucloud.errors import ServiceError
from portal.forms import CordonForm, DrainForm, HostClusterUpdateForm, RetireForm
from portal.scoping import actor_of
from portal.views.fleet import require_platform_admin


def _update(request: HttpRequest, host_cluster: HostCluster) -> str:
    form = HostClusterUpdateForm(request.POST, prefix=host_cluster.name)
    if not form.is_valid():
        raise ServiceError("; ".join(str(e) for errors in form.errors.values() for e in errors))
    data = form.cleaned_data
    watch = data["watch_tenants"].strip()
    lifecycle.update_host_cluster(
        actor=actor_of(request),
        host_cluster=host_cluster,
        kubeconfig=data["kubeconfig"] or None,
        scheduler=data["scheduler"] or None,
        watch_tenants=watch if watch != host_cluster.tenants_namespace else None,
    )
    return f"Host cluster {host_cluster.name} updated."


def _cordon(request: HttpRequest, host_cluster: HostCluster) -> str:
    form = CordonForm(request.POST, prefix=host_cluster.name)
    reason = form.cleaned_data["reason"] if form.is_valid() else ""
    lifecycle.cordon_host_cluster(actor=actor_of(request), host_cluster=host_cluster, reason=reason)
    return f"Host cluster {host_cluster.name} is cordoned: it takes no new tenants."


def _uncordon(request: HttpRequest, host_cluster: HostCluster) -> str:
    lifecycle.uncordon_host_cluster(actor=actor_of(request), host_cluster=host_cluster)
    return f"Host cluster {host_cluster.name} takes new tenants again."


def _drain(request: HttpRequest, host_cluster: HostCluster) -> str:
    form = DrainForm(request.POST, prefix=host_cluster.name, exclude=host_cluster.name)
    if not form.is_valid():
        raise ServiceError("; ".join(str(e) for errors in form.errors.values() for e in errors))
    data = form.cleaned_data
    report = lifecycle.drain_host_cluster(
        actor=actor_of(request),
        host_cluster=host_cluster,
        target=host_cluster_named(data["target"], "target"),
        recreate=data["recreate"],
        dry_run=data["preview"],
    )
    verb = "would move" if report.dry_run else "moved"
    parts = [f"{verb} {slug} to {target}" for slug, target in sorted(report.moved.items())]
    parts += [f"kept {slug}: {why}" for slug, why in sorted(report.refused.items())]
    head = f"Drain of {host_cluster.name}" + (" (preview, nothing changed)" if report.dry_run else "")
    return f"{head}: " + ("; ".join(parts) if parts else "no tenants to move") + "."


def _retire(request: HttpRequest, host_cluster: HostCluster) -> str:
    form = RetireForm(request.POST, prefix=host_cluster.name)
    reason = form.cleaned_data["retire_reason"] if form.is_valid() else ""
    lifecycle.retire_host_cluster(actor=actor_of(request), host_cluster=host_cluster, reason=reason)
    return f"Host cluster {host_cluster.name} is retired: out of service, its history kept."


def _unretire(request: HttpRequest, host_cluster: HostCluster) -> str:
    lifecycle.unretire_host_cluster(actor=actor_of(request), host_cluster=host_cluster)
    return (
        f"Host cluster {host_cluster.name} is back in service, still cordoned: uncordon it to take tenants."
    )


def _delete(request: HttpRequest, host_cluster: HostCluster) -> str:
    lifecycle.delete_host_cluster(actor=actor_of(request), host_cluster=host_cluster)
    return f"Host cluster {host_cluster.name} deleted."


ACTIONS: dict[str, Callable[[HttpRequest, HostCluster], str]] = {
    "update": _update,
    "cordon": _cordon,
    "uncordon": _uncordon,
    "drain": _drain,
    "retire": _retire,
    "unretire": _unretire,
    "delete": _delete,
}


@login_required
@require_POST
def host_cluster_action(request: HttpRequest, name: str, action: str) -> HttpResponse:
    """One change to a host cluster, as its API route does it; the outcome or the refusal as a message."""
    require_platform_admin(request, "changing a host cluster")
    if action not in ACTIONS:
        raise Http404(f"no action {action!r}")
    host_cluster = get_object_or_404(HostCluster, name=name)
    try:
        messages.success(request, ACTIONS[action](request, host_cluster))
    except ServiceError as error:
        messages.error(request, f"{host_cluster.name}: {error.detail}")
    return redirect("portal:host-clusters")
