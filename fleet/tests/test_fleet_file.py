from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from fleet import fleet_file
from fleet.models import Gpu, HostCluster, Node

GOOD = """\
apiVersion: gpucloud.io/v1alpha1
kind: Fleet
metadata: {name: tiny}
spec:
  nodeGroups:
    - name: h200-r1
      count: 2
      gpuModel: h200-141gb
      gpusPerNode: 8
      cpuMilli: 1000
      memoryMiB: 1024
      topology: {rack: rack-1}
"""


def write(tmp_path, text):
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    return path


def test_the_demo_fleet_has_about_a_hundred_gpus_over_three_racks():
    fleet = fleet_file.load("deploy/fleets/demo.yaml")
    gpus = [gpu for node in fleet.nodes for gpu in node.gpus]
    assert len(gpus) == 104
    assert {node.rack for node in fleet.nodes} == {"rack-1", "rack-2", "rack-3"}
    assert {gpu.model for gpu in gpus} == {"h200-141gb", "a100-80gb"}


def test_gpu_uuids_are_stable_and_shaped_like_nvml_ones():
    a, b = fleet_file.load("deploy/fleets/demo.yaml"), fleet_file.load("deploy/fleets/demo.yaml")
    assert a.nodes[0].gpus[0].uuid == b.nodes[0].gpus[0].uuid
    assert a.nodes[0].gpus[0].uuid.startswith("GPU-")


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "gpuModel: h200-141gb",
            "gpuModel: h900",
            ":6: gpuModel 'h900' is not in the catalog; known models: h100-80gb",
        ),
        ("count: 2", "count: -2", ":6: 'count' must be a whole number"),
        ("      gpusPerNode: 8\n", "", ":6: 'gpusPerNode' is missing"),
        ("{rack: rack-1}", "{row: 3}", ":6: unknown topology keys ['row']"),
        ("kind: Fleet", "kind: Pod", "not a fleet file"),
        ("name: h200-r1", "name: H200_R1", "not a DNS-safe name"),
        ("metadata: {name: tiny}", "metadata: {name: tiny", ": not valid YAML"),
    ],
)
def test_a_malformed_fleet_file_names_the_file_and_line(tmp_path, old, new, message):
    path = write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(fleet_file.FleetFileError) as error:
        fleet_file.load(path)
    assert str(error.value).startswith(str(path))
    assert message in str(error.value)


def test_load_fleet_is_idempotent_and_removes_nodes_no_longer_listed(db, tmp_path):
    path = write(tmp_path, GOOD)
    call_command("load_fleet", str(path), stdout=StringIO())
    call_command("load_fleet", str(path), stdout=StringIO())
    assert Node.objects.count() == 2
    assert Gpu.objects.count() == 16

    call_command("load_fleet", str(write(tmp_path, GOOD.replace("count: 2", "count: 1"))), stdout=StringIO())
    assert Node.objects.count() == 1
    assert Gpu.objects.count() == 8
    assert HostCluster.objects.get().driver == "simulated"


def test_the_command_reports_a_bad_file_without_writing(db, tmp_path):
    with pytest.raises(CommandError, match="gpuModel"):
        call_command("load_fleet", str(write(tmp_path, GOOD.replace("h200-141gb", "x"))), stdout=StringIO())
    assert not HostCluster.objects.exists()
