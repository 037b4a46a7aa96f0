"""A newcomer follows the README top to bottom: the portal walkthrough, then the API's, then the Terraform
section's first lines, on the embedded default, and meets no error (issue 24 §7).

Slugs are never used twice, so each walkthrough must make a tenant of its own; the account the Terraform
example names is made by a command that is harmless to run again. The live test runs the README's own
text: the API block through bash, the portal steps through the portal's forms over HTTP.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import requests

from tests.embedded import ROOT, embedded_default, get, wait_until

README = (ROOT / "README.md").read_text()
API_DOC = (ROOT / "docs" / "api.md").read_text()
TERRAFORM_EXAMPLE = (ROOT / "deploy" / "terraform" / "example" / "main.tf").read_text()


def portal_slug() -> str:
    found = re.search(r"\*New tenant\* → slug `([a-z0-9-]+)`", README)
    assert found, "the README's portal walkthrough names no slug"
    return found.group(1)


def sh_block_after(heading: str) -> str:
    """The README's first sh block after `heading`."""
    start = README.index("```sh\n", README.index(heading)) + len("```sh\n")
    return README[start : README.index("\n```", start)]


def api_block() -> str:
    return sh_block_after("The same in the API")


def terraform_block() -> str:
    return sh_block_after("## Terraform")


def slugs_made(text: str) -> set[str]:
    return set(re.findall(r'"slug": "([a-z0-9-]+)"', text))


def test_each_walkthrough_makes_a_tenant_of_its_own():
    api_flow = API_DOC[API_DOC.index("## The flow") : API_DOC.index("## Endpoints")]
    terraform = re.search(r'variable "slug" \{[^}]*default\s*=\s*"([a-z0-9-]+)"', TERRAFORM_EXAMPLE)
    assert terraform, "the Terraform example has no default slug"
    made = [{portal_slug()}, slugs_made(api_block()), slugs_made(api_flow), {terraform.group(1)}]
    assert all(len(slugs) == 1 for slugs in made), made
    names = [next(iter(slugs)) for slugs in made]
    assert len(set(names)) == len(names), f"walkthroughs share a slug: {names}"


def test_the_readme_makes_the_terraform_member_with_a_command_not_a_shell_line():
    assert "manage.py shell" not in README
    assert "manage.py create_user alice" in terraform_block()


@pytest.mark.worker
def test_a_newcomer_follows_the_portal_then_the_api_walkthrough_without_an_error(tmp_path):
    with embedded_default(tmp_path / "var") as running:
        password = re.search(r"password\s+(\S+)", running.printed)
        assert password
        _create_in_the_portal(running.base, password.group(1), portal_slug())

        (tmp_path / "manage.py").symlink_to(ROOT / "manage.py")  # the README runs from a checkout's root
        env = {**running.env, "PYTHONPATH": str(ROOT)}
        script = (
            api_block()
            .replace("export GPC=gpc_…", f"export GPC={running.token}")
            .replace("http://127.0.0.1:8000", running.base)
            .replace(".venv/bin/python", sys.executable)
        )
        done = subprocess.run(
            ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )
        said = done.stdout + done.stderr
        assert done.returncode == 0, said
        assert "Traceback" not in said
        assert '"status":409' not in said.replace(" ", ""), said
        assert "conflict" not in said.lower(), said
        (slug,) = slugs_made(api_block())
        status, tenant = get(f"{running.base}/api/v1/tenants/{slug}/", running.token)
        assert (status, tenant["display_name"]) == (200, "Speech Team")  # the edited manifest was applied

        line = next(row for row in terraform_block().splitlines() if "manage.py create_user" in row)
        line = line.replace(".venv/bin/python", sys.executable)
        for _ in (1, 2):  # the second run, as after the Users page made alice: no traceback, exit 0
            ran = subprocess.run(
                ["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
            )
            assert ran.returncode == 0, ran.stderr
            assert "Traceback" not in ran.stderr, ran.stderr
        assert ran.stdout.strip() == "alice has an account already; nothing changed"


def _create_in_the_portal(base: str, password: str, slug: str) -> None:
    """Step 1 of the README's portal walkthrough, through the portal's own forms."""
    browser = requests.Session()
    browser.get(f"{base}/login/", timeout=30)
    signed_in = browser.post(
        f"{base}/login/",
        data={"username": "admin", "password": password, "csrfmiddlewaretoken": browser.cookies["csrftoken"]},
        headers={"Referer": f"{base}/login/"},
        timeout=30,
    )
    assert signed_in.url == f"{base}/", signed_in.text[:500]
    form = browser.get(f"{base}/tenants/new/", timeout=30)
    assert form.status_code == 200
    made = browser.post(
        f"{base}/tenants/new/",
        data={
            "slug": slug,
            "display_name": "",
            "trust_tier": "standard",
            "host_cluster": "",
            "gpu_class": "h200-141gb",
            "guaranteed": "8",
            "burst": "",
            "csrfmiddlewaretoken": browser.cookies["csrftoken"],
        },
        headers={"Referer": f"{base}/tenants/new/"},
        timeout=30,
    )
    assert made.url == f"{base}/tenants/{slug}/", made.text[:2000]
    wait_until(lambda: 'id="cluster-state">ready' in browser.get(made.url, timeout=30).text, 30)
