"""`manage.py bootstrap`: the first run's admin, token and the portal address it is really served on."""

import io

from django.core.management import call_command


def test_bootstrap_names_the_portal_address_it_is_given(gpu_catalog):
    out = io.StringIO()
    call_command("bootstrap", addr="127.0.0.1:8123", stdout=out)
    assert "portal     http://127.0.0.1:8123/   user admin" in out.getvalue()


def test_bootstrap_names_the_default_address_of_make_run(gpu_catalog):
    out = io.StringIO()
    call_command("bootstrap", stdout=out)
    assert "http://127.0.0.1:8000/" in out.getvalue()
