"""Small committed CSV slices of the Alibaba openb trace for the engine tests (no database)."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture
def node_csv() -> Path:
    return DATA / "openb_node_list_slice.csv"


@pytest.fixture
def pod_csv() -> Path:
    return DATA / "openb_pod_list_slice.csv"
