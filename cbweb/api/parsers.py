"""A JSON parser that bounds a request body's size and nesting before it builds any object.

Python's json module decodes nested arrays and objects recursively: a body nested a thousand levels
deep raised RecursionError, which DRF's JSONParser does not catch (a 500). The body is read up to
CB_MAX_SPEC_BYTES + 1 bytes and its nesting is measured by a linear scan first; either limit gives
a 400 in the API's error shape naming the limit.
"""

from __future__ import annotations

import codecs
import re
from itertools import accumulate
from typing import IO, Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.utils import json

# String literals (with escapes) are removed before brackets are counted: "[" inside a string is text.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(rb"[^\[\]{}]")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def json_depth(raw: bytes) -> int:
    """Return the deepest nesting of arrays and objects in a JSON text (0 for a scalar), in linear time."""
    brackets = _BRACKETS.sub(b"", _STRING.sub(b"", raw))
    return max(accumulate(_STEP[b] for b in brackets), default=0)


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
