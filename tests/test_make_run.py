"""`make run`'s embedded default, as a person would use it: real processes, real HTTP, the printed token.

SQLite and the embedded SQLite broker under a fresh var/ directory, `manage.py bootstrap` for the admin and
token, `manage.py serve_embedded` for web + worker + beat, then the README flow over HTTP, then Ctrl-C.
"""

import time

import pytest

from tests.embedded import embedded_default, get, request, wait_until

pytestmark = pytest.mark.worker


@pytest.fixture
def embedded(tmp_path):
    with embedded_default(tmp_path / "var") as running:
        yield running.base, running.token, running.printed


def test_the_printed_token_drives_a_tenant_through_its_life_on_the_embedded_default(embedded):
    base, token, printed = embedded
    api = base + "/api/v1"
    assert "password" in printed
    assert token.startswith("gpc_")

    assert request("POST", f"{api}/tenants/", token, {"slug": "vision"})[0] == 201
    started = time.monotonic()
    wait_until(lambda: get(f"{api}/tenants/vision/", token)[1].get("state") == "ready", 10)
    assert time.monotonic() - started < 10

    assert request("PUT", f"{api}/tenants/vision/quotas/h200-141gb/", token, {"guaranteed": 8})[0] == 201
    status, refusal = request("PUT", f"{api}/tenants/vision/quotas/h200-141gb/", token, {"guaranteed": 65})
    assert status == 422
    assert (refusal["capacity"], refusal["requested"], refusal["available"]) == (64, 65, 64)
    h200 = get(f"{api}/fleet/capacity/?gpu_model=h200-141gb&limit=1", token)[1]["results"][0]
    assert (h200["guaranteed"], h200["available"]) == (8, 56)

    assert request("DELETE", f"{api}/tenants/vision/", token)[0] == 202
    wait_until(lambda: get(f"{api}/tenants/vision/", token)[1].get("state") == "deleted", 10)
    h200 = get(f"{api}/fleet/capacity/?gpu_model=h200-141gb&limit=1", token)[1]["results"][0]
    assert (h200["guaranteed"], h200["available"]) == (0, 64)

    assert get(base + "/readyz")[0] == 200
    assert get(f"{api}/tenants/", "gpc_wrong")[0] == 401
