"""Attack tests (issue 17) run in the web process with the web suite's settings and factories."""

from __future__ import annotations

from tests.cbweb.conftest import (  # noqa: F401  (fixtures and the marker hook, from their one place)
    _fast_password_hashing,
    alice,
    api,
    bob,
    make_run,
    make_user,
    make_workflow,
    pytest_collection_modifyitems,
)
