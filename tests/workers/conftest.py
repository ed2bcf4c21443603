"""Worker tests share the web suite's settings and factories."""

from tests.cbweb.conftest import *  # noqa: F403
from tests.cbweb.conftest import (  # noqa: F401  (autouse; `*` skips names with a leading underscore)
    _fast_password_hashing,
    _local_executor_stopped,
    _private_cache,
)
