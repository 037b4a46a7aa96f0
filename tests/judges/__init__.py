"""Judges of the hostile-tenant suite: each says how one layer of the host cluster treats a pod (issue 26).

Test helpers, not product code: each module ports or evaluates what a layer enforces on the host cluster,
against the objects gpucloud rendered (`world.World`).
"""
