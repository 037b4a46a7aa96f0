"""When a live object still matches what gpucloud would apply: the test both level-triggered passes use.

The host pass (`clusters.drivers.kubernetes`) and the access pass inside each vCluster
(`clusters.access.rbac`) apply an object only when it is missing or no longer `in_sync`.

Not a driver: the drivers and the access pass import it, it imports none of them.
"""

from __future__ import annotations

from typing import Any

from gpucloud.kube.meta import SPEC_HASH, Manifest

__all__ = ["contains", "in_sync"]


def contains(desired: Any, live: Any) -> bool:
    """Whether `live` still holds everything `desired` sets (the server may add defaults around it)."""
    if live is None and desired in ({}, []):
        return True  # typed APIs omit empty maps and lists
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(contains(v, live.get(key)) for key, v in desired.items())
    if isinstance(desired, list):
        return isinstance(live, list) and len(desired) == len(live) and all(map(contains, desired, live))
    if desired == live:
        return True
    # Quantities and numbers come back as strings or numbers depending on the kind's schema.
    return isinstance(live, str | int | float) and str(desired) == str(live)


def in_sync(desired: Manifest, live: Manifest) -> bool:
    """Same spec-hash, and the live object still contains the desired fields, labels and annotations."""
    live_meta, meta = live.get("metadata", {}), desired["metadata"]
    if (live_meta.get("annotations") or {}).get(SPEC_HASH) != meta["annotations"][SPEC_HASH]:
        return False
    body = {key: value for key, value in desired.items() if key not in ("apiVersion", "kind", "metadata")}
    return (
        contains(body, live)
        and contains(meta.get("labels", {}), live_meta.get("labels") or {})
        and contains(meta.get("annotations", {}), live_meta.get("annotations") or {})
    )
