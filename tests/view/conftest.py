"""Fixtures for the viewer and the list queries: ``filled`` is the ``store`` fixture
(SQLite and PostgreSQL) holding the runs of support/view_fixtures.py."""

from __future__ import annotations

import pytest
from support.view_fixtures import fill


@pytest.fixture
def filled(store):
    return store, fill(store)
