"""The API's JSON parser: DRF's, refusing bodies nested too deep with a 400 instead of a crash.

Python's JSON decoder runs out of stack on a body like [[[[...]]]] nested thousands deep
(RecursionError, a 500), and anything that walks parsed data afterwards could too.
"""

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

# Every request body the API documents is a flat object holding at most a list of strings.
MAX_JSON_DEPTH = 32


def _too_deep() -> ParseError:
    return ParseError(
        f"JSON parse error - the body is nested more than {MAX_JSON_DEPTH} levels deep. "
        "Send one JSON object with the documented fields."
    )


def json_depth(value: object) -> int:
    """How deeply lists and objects nest in parsed JSON (a scalar is 0). Iterative: no recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_JSON_DEPTH:
            break
        stack.extend((child, depth + 1) for child in children)
    return deepest


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser, refusing bodies nested more than MAX_JSON_DEPTH levels with a 400."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise _too_deep() from None
        if json_depth(data) > MAX_JSON_DEPTH:
            raise _too_deep()
        return data
