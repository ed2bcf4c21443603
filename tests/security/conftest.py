"""Attack tests (issue 17) run in the web process with the web suite's settings and factories."""

from tests.cbweb.conftest import *  # noqa: F403
from tests.cbweb.conftest import _fast_password_hashing, _local_executor_stopped  # noqa: F401
