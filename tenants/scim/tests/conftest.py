"""A SCIM token, as a platform administrator makes one for an identity provider."""

from __future__ import annotations

from typing import Any

import pytest

from core.audit import Actor
from tenants.tokens import create_scim_token


@pytest.fixture
def scim_token(admin: Any) -> str:
    _, token = create_scim_token(actor=Actor.of(admin), name="okta")
    return token


@pytest.fixture
def scim(scim_token: str) -> Any:
    from tenants.scim.tests.helpers import Scim

    return Scim(scim_token)
