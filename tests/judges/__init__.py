"""Judges of the hostile-tenant suite: one module per layer that enforces something on a host cluster.

Each layer's module has one entry point, `judge(pod, world) -> list[str]`: the messages with which that
layer refuses `pod` (a host pod as vCluster would create it in its tenant's host namespace), empty when it
admits it. `World` (world.py) is what they all judge against: the objects gpucloud rendered for a host
cluster and the state of its nodes. The suite that runs them all is clusters/tests/test_hostile_tenants.py.
"""
