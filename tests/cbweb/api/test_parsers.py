"""The API's JSON parser: nesting measured without decoding, strings not counted."""

from __future__ import annotations

import pytest

from cbweb.api.parsers import json_depth


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        (b"1", 0),
        (b'"[[["', 0),
        (b"[]", 1),
        (b'{"a": [1, {"b": "]]]}"}], "c": {}}', 3),
        (b'["\\"[["]', 1),
        (b"[" * 1000 + b"]" * 1000, 1000),
    ],
)
def test_json_depth_counts_arrays_and_objects_outside_strings(text: bytes, depth: int) -> None:
    assert json_depth(text) == depth
