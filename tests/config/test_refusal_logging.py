"""A refused request is logged as one line (user, method, path, reason), never as a traceback."""

import logging

import pytest
from django.urls import reverse

from annotation.models import Role
from config.log_filters import OneLineRefusals
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def _refusals(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "django.request" and getattr(r, "status_code", None) == 403]


def _only_refusal(client, caplog, url: str) -> logging.LogRecord:
    """GET url as the reader rita (refused: 403) and return the one refusal logged."""
    client.force_login(make_user(Role.READER, username="rita"))
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client.get(url)
    assert response.status_code == 403
    [record] = _refusals(caplog)
    return record


def test_a_403_from_a_page_is_one_line_naming_user_method_path_and_reason(client, caplog):
    record = _only_refusal(client, caplog, reverse("study_list"))
    assert record.levelno == logging.WARNING
    assert record.exc_info is None and record.exc_text is None
    assert record.getMessage() == (
        f"Refused (403): user=rita method=GET path={reverse('study_list')} reason=needs the role coordinator"
    )
    assert "Traceback" not in caplog.text


def test_a_403_from_the_api_is_one_line_too(client, caplog):
    record = _only_refusal(client, caplog, reverse("study-list"))
    assert record.exc_info is None
    assert record.getMessage().startswith(f"Refused (403): user=rita method=GET path={reverse('study-list')} reason=")
    assert "\n" not in record.getMessage()


def test_a_refusal_cannot_break_the_log_line(rf):
    request = rf.get("/studies/")
    request.path = "/studies/\nINFO forged line"
    request.user = make_user(Role.READER, username="rita\nroot")
    record = logging.LogRecord("django.request", logging.WARNING, __file__, 1, "Forbidden", (), None)
    record.status_code, record.request = 403, request
    OneLineRefusals().filter(record)
    assert record.getMessage() == (
        "Refused (403): user=rita\\nroot method=GET path=/studies/\\nINFO forged line reason=permission denied"
    )


def test_other_warnings_keep_their_own_words(client, caplog):
    client.force_login(make_user(Role.READER, username="rita"))
    with caplog.at_level(logging.WARNING, logger="django.request"):
        client.get("/no-such-page/")
    messages = [r.getMessage() for r in caplog.records if r.name == "django.request"]
    assert messages and all(not m.startswith("Refused (403)") for m in messages)


def test_the_line_survives_logging_being_configured_twice(client, caplog):
    # dictConfig adds a logger's filters again on every run (django.setup() in a test, a command).
    import logging.config

    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)  # it also takes caplog's handler off the root logger
    logger = logging.getLogger("django.request")
    logger.addHandler(caplog.handler)
    client.force_login(make_user(Role.READER, username="rita"))
    try:
        with caplog.at_level(logging.WARNING, logger="django.request"):
            client.get(reverse("study_list"))
    finally:
        logger.removeHandler(caplog.handler)
    [record] = _refusals(caplog)
    assert record.getMessage().endswith("reason=needs the role coordinator")
