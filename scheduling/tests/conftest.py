"""Fixtures for the engine tests: small committed CSV slices, no database."""

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture
def node_csv() -> Path:
    return DATA / "openb_node_list_slice.csv"


@pytest.fixture
def pod_csv() -> Path:
    return DATA / "openb_pod_list_slice.csv"
