"""The fleet and capacity pages show the GPUs out of service and why."""

import pytest

from billing.services.ingest import ingest_scrape
from billing.tests.conftest import MINI_FLEET, SYSTEM, Row, at, exposition, gpu_uuid
from fleet import fleet_file
from fleet.models import HostCluster
from fleet.services import load_fleet


@pytest.fixture
def mini(gpu_catalog: None) -> HostCluster:
    return load_fleet(actor=SYSTEM, fleet=fleet_file.parse(MINI_FLEET), source="mini").host_cluster


def fault(mini):
    rows = [Row(gpu_uuid("h100-0", i), index=i) for i in range(4)]
    ingest_scrape(mini, "h100-0", at(0), exposition("h100-0", rows))
    labels = f'gpu="2",UUID="{gpu_uuid("h100-0", 2)}",hostname="h100-0"'
    text = exposition("h100-0", rows) + f"DCGM_FI_DEV_XID_ERRORS{{{labels}}} 79\n"
    ingest_scrape(mini, "h100-0", at(30), text)


def test_the_fleet_page_lists_what_is_out_and_why(client, admin, mini):
    fault(mini)
    client.force_login(admin)
    page = client.get("/fleet/").content.decode()
    assert "Out of service" in page
    assert f"{gpu_uuid('h100-0', 2)}" in page
    assert "xid-79" in page
    assert "XID 79: fatal (reboot node)" in page
    assert "h100-0 GPU 2 · h100-80gb · quarantined · xid-79 since" in page


def test_the_capacity_page_counts_the_gpus_out(client, admin, mini):
    fault(mini)
    client.force_login(admin)
    page = client.get("/capacity/").content.decode()
    assert "GPUs out" in page
    assert "(xid-79)" in page


def test_a_fleet_without_faults_shows_no_out_of_service_table(client, admin, mini):
    client.force_login(admin)
    assert "Out of service" not in client.get("/fleet/").content.decode()
