"""The Docker engine for the tests of this folder only: the stack's own engine, when the machine has
none, stops once they are done, not at the end of the session."""

from __future__ import annotations

import pytest

from lineage_assets.stack.services.engine import ENGINE, ready_engine


@pytest.fixture(scope="package")
def engine(stack):
    """The Docker engine (the stack's, when the machine has none) with the project's image; the client of it."""
    yield ready_engine(stack)
    stack.down([ENGINE.name])  # nothing when the engine is the machine's own
