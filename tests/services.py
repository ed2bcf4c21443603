"""Whether the test services answer: PostgreSQL and Redis on their default (or given) addresses.

``python -m tests.services URL`` prints URL when its server answers and exits 0; otherwise it prints
why to stderr and exits 1 (`make test` runs the web tests on PostgreSQL only where it answers).
"""

from __future__ import annotations

import socket
import sys
from urllib.parse import urlparse


def reachable(url: str) -> bool:
    """Return whether a TCP connection to the host and port of ``url`` opens within a second."""
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 0), timeout=1):
            return True
    except OSError:
        return False


def main(argv: list[str]) -> int:
    (url,) = argv
    if reachable(url):
        print(url)
        return 0
    where = urlparse(url)
    print(
        f"{where.hostname}:{where.port} does not answer: the web tests run on SQLite and the tests that "
        f"need {where.scheme} skip",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
