"""The deployed stack's fixtures (tests/stack.py) for the AWS tests."""

from __future__ import annotations

import pytest

from claros.store.base import Store
from tests.stack import functions, keys, stack, stack_store, stream_batches

__all__ = ["functions", "keys", "stack", "stack_store", "store", "stream_batches"]


@pytest.fixture
def store(stack_store: Store) -> Store:
    """Here, ``store`` is the stack's own tables (not both stores, as elsewhere)."""
    return stack_store
