"""Worker tests share the web suite's settings and factories."""

from tests.cbweb.conftest import *  # noqa: F403
from tests.cbweb.conftest import _local_executor_stopped  # noqa: F401  (autouse; `*` skips it)
