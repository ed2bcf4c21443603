"""Worker tests share the web suite's settings and factories."""

from tests.cbweb.conftest import *  # noqa: F403
from tests.cbweb.conftest import _fast_password_hashing, _private_cache  # noqa: F401  (autouse; not in *)
