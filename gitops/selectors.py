"""Reads of GitOps sources for pages."""

from __future__ import annotations

from collections import defaultdict

from gitops.models import GitSource, ManagedObject


def sources_with_objects() -> list[tuple[GitSource, list[ManagedObject]]]:
    """Every Git source, by name, with the objects it manages (two queries)."""
    managed: dict[str, list[ManagedObject]] = defaultdict(list)
    for row in ManagedObject.objects.filter(source__startswith="gitops:").only("kind", "name", "source"):
        managed[row.source].append(row)
    return [(source, managed[source.owner]) for source in GitSource.objects.order_by("name")]
