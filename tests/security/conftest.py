"""Security tests share the web suite's settings and factories."""

from tests.cbweb.conftest import *  # noqa: F403
