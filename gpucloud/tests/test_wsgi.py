"""A web process runs the start-up hooks named in settings (the base layer names no domain app itself)."""

from __future__ import annotations

import importlib
import sys

from django.utils.module_loading import import_string

CALLS: list[str] = []


def record() -> None:
    CALLS.append("started")


def test_a_web_process_runs_the_start_up_hooks_named_in_settings(settings):
    settings.WSGI_STARTUP = [f"{__name__}.record"]
    sys.modules.pop("gpucloud.wsgi", None)
    importlib.import_module("gpucloud.wsgi")
    assert CALLS == ["started"]


def test_every_start_up_hook_in_settings_exists(settings):
    assert settings.WSGI_STARTUP, "the SSO warm-up is named here"
    for hook in settings.WSGI_STARTUP:
        assert callable(import_string(hook))
