"""A JSON parser that bounds a request body's size and nesting before it builds any object.

Python's json module decodes nested arrays and objects recursively: a body nested a thousand levels
deep raised RecursionError, which DRF's JSONParser does not catch (a 500). The body is read up to
CB_MAX_SPEC_BYTES + 1 bytes and its nesting is measured by a linear scan first; either limit gives
a 400 in the API's error shape naming the limit.
"""

from __future__ import annotations

import codecs
import re
from typing import IO, Any

import numpy as np
from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.utils import json

# A string literal (with escapes) is removed before brackets are counted: "[" inside a string is text.
# Possessive repeats never backtrack, and an unterminated literal (or one ending in a lone backslash)
# runs to the end of the body instead of failing: a failed match would be retried from every later
# quote, which made a run of escaped quotes cost time quadratic in its length.
_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.DOTALL)
# +1 for an opening bracket, -1 for a closing one, 0 for every other byte.
_STEP = np.zeros(256, dtype=np.int8)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1


def json_depth(raw: bytes) -> int:
    """Return the deepest nesting of arrays and objects in a JSON text (0 for a scalar), in linear time."""
    outside = np.frombuffer(_STRING.sub(b"", raw), dtype=np.uint8)
    if not outside.size:
        return 0
    return max(int(np.cumsum(_STEP[outside], dtype=np.int64).max()), 0)


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser with CB_MAX_SPEC_BYTES and CB_MAX_SPEC_DEPTH checked before decoding."""

    def parse(
        self, stream: IO[bytes] | None, media_type: str | None = None, parser_context: Any = None
    ) -> Any:
        if stream is None:
            return None
        max_bytes = int(settings.CB_MAX_SPEC_BYTES)
        max_depth = int(settings.CB_MAX_SPEC_DEPTH)
        raw = stream.read(max_bytes + 1)
        if len(raw) > max_bytes:
            raise ParseError(f"the request body is larger than the limit of {max_bytes} bytes")
        depth = json_depth(raw)
        if depth > max_depth:
            raise ParseError(f"the JSON body nests {depth} levels deep, over the limit of {max_depth}")
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.decode(raw, encoding)
            return json.loads(text, parse_constant=json.strict_constant if self.strict else None)
        except (ValueError, RecursionError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
