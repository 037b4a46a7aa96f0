"""scim2-tester (the python-scim project's conformance checker) against the live server over real HTTP."""

from __future__ import annotations

import httpx2
from scim2_client.engines.httpx2 import SyncSCIMClient
from scim2_tester import Status, check_server

FAILED = {Status.ERROR, Status.CRITICAL}


def test_scim2_tester_finds_no_failed_check(live_server, scim_token, transactional_db):
    with httpx2.Client(
        base_url=f"{live_server.url}/scim/v2", headers={"Authorization": f"Bearer {scim_token}"}, timeout=30
    ) as http:
        results = check_server(SyncSCIMClient(http))

    failed = [f"{r.resource_type or ''} {r.title}: {r.reason}" for r in results if r.status in FAILED]
    assert not failed, "\n".join(failed)
    ran = [r for r in results if r.status not in (Status.SKIPPED,)]
    assert len(ran) > 50, f"scim2-tester ran only {len(ran)} checks"
    assert {r.resource_type for r in ran} >= {"User", "Group"}
