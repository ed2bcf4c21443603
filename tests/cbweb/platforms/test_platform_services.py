from __future__ import annotations

from typing import Any

import pytest

from benchmarks.platform import fingerprint
from cbweb.platforms.selectors import platform_live
from cbweb.platforms.services import platform_register


def test_registering_the_same_machine_twice_refreshes_one_platform(db: Any) -> None:
    info = fingerprint()
    first = platform_register(fingerprint=info)
    second = platform_register(fingerprint={**info, "python": "9.9"}, queue="gpu0")
    assert first.pk == second.pk
    assert second.info["python"] == "9.9" and second.queue == "gpu0"
    assert list(platform_live()) == [second]


def test_a_fingerprint_without_id_is_refused(db: Any) -> None:
    with pytest.raises(ValueError, match="no 'id'"):
        platform_register(fingerprint={"host": "x"})
