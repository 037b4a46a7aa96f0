"""Celery tasks of GitOps sync: the periodic pass that finds due sources, and the sync of one source (which a
signed webhook also asks for). Both are safe to run twice: a sync of an unchanged commit writes nothing."""

from __future__ import annotations

from gitops import services
from gitops.models import GitSource
from gpucloud import celery as names
from gpucloud.celery import enqueue
from gpucloud.tasks import task


@task(names.SYNC_GITOPS_DUE, max_retries=2)
def sync_due_sources() -> None:
    services.forget_deliveries()
    for source in services.due_sources():
        enqueue(names.SYNC_GITOPS_SOURCE, source.pk)


@task(names.SYNC_GITOPS_SOURCE, max_retries=3)
def sync_source(source_id: int) -> None:
    """Sync one source; its failure (bad commit, unreachable URL) is recorded on it, not retried."""
    source = GitSource.objects.filter(pk=source_id).first()
    if source is not None:
        services.sync(source)
