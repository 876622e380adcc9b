"""Logging filters: what the console shows of a request the application refused."""

import logging


def _escaped(value: str) -> str:
    # The same escape Django gives its own request log's arguments: no line breaks injected.
    return value.encode("unicode_escape").decode("ascii")


class OneLineRefusals(logging.Filter):
    """A refused request (403) is logged as one line: user, method, path and reason, no traceback.

    Django logs a PermissionDenied raised in a view with its whole traceback; an access sweep then
    buries the real errors under hundreds of them. A refusal is expected behaviour, not a fault.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        # Once per record: logging.config.dictConfig adds a logger's filters again each time it runs.
        if getattr(record, "status_code", None) != 403 or getattr(record, "refusal_one_line", False):
            return True
        record.refusal_one_line = True
        request = getattr(record, "request", None)
        error = record.exc_info[1] if record.exc_info else None
        reason = str(error) if error is not None and str(error) else "permission denied"
        user = getattr(request, "user", None)
        who = user.get_username() if user is not None and user.is_authenticated else "anonymous"
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        record.msg = "Refused (403): user=%s method=%s path=%s reason=%s"
        record.args = tuple(
            _escaped(value)
            for value in (who, getattr(request, "method", "?") or "?", getattr(request, "path", "?"), reason)
        )
        return True
