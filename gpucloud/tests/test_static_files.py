"""Static files in production: WhiteNoise serves what `manage.py collectstatic` gathered, with DEBUG off."""

from __future__ import annotations

from django.core.management import call_command
from django.test import Client


def test_production_serves_the_collected_static_files_with_debug_off(settings, tmp_path):
    settings.DEBUG = False
    settings.STATIC_ROOT = tmp_path / "static"
    settings.WHITENOISE_USE_FINDERS = False  # production: only what was collected
    call_command("collectstatic", "--noinput", verbosity=0)

    client = Client()  # a new handler, so its WhiteNoise indexes the collected files
    css = client.get("/static/portal/app.css")
    swagger = client.get("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")

    assert (css.status_code, css["Content-Type"]) == (200, 'text/css; charset="utf-8"')
    assert swagger.status_code == 200
    assert "javascript" in swagger["Content-Type"]
    assert client.get("/static/portal/missing.css").status_code == 404
