"""Undo next to the reader guide, the practice round and the single-key setting: practice ratings are
never settled or taken back, the guide's confirmation still comes before an item an undo reopens,
and the U shortcut is offered only while single-key shortcuts are on."""

import uuid

import pytest
from django.urls import reverse

from annotation.guide import confirm_guide, publish_guide
from annotation.models import Annotation, PracticeAttempt, Preferences, RatingChoice, Study, Task
from annotation.practice import import_practice_items, next_practice, pending_step, show_practice, submit_practice
from annotation.reading import next_assignment
from consensus.services import UndoRefused, settle_due_ratings, show_assignment, submit_annotation, undo_last_rating
from tests.annotation.test_practice import practice_file, practice_row
from tests.factories import make_reading_study

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def reading():
    """A study with a two-minute undo window and a reader with two Task 1 items and a Task 2 item.

    Three exams, six readers: each reader has one item of each exam, two Task 1 and one Task 2.
    """
    study, readers, _ = make_reading_study(pairs=3, readers=6)
    Study.objects.filter(pk=study.pk).update(undo_window_seconds=120)
    study.refresh_from_db()
    for reader in readers:
        if reader.assignments.filter(task=Task.REALISM).count() >= 2 and reader.assignments.filter(
            task=Task.EQUIVALENCE
        ):
            return study, reader
    raise AssertionError("no reader with two Task 1 items and a Task 2 item")


def _first_open(reader, task=Task.REALISM):
    return reader.assignments.filter(task=task, status="open").order_by("queue_order", "pk").first()


def _rate(reader, assignment, rating=RatingChoice.MINOR_ISSUES):
    show_assignment(assignment)
    return submit_annotation(
        reader=reader,
        assignment_id=assignment.public_id,
        rating=rating,
        rationale="Odd word order.",
        form_token=uuid.uuid4(),
    ).annotation


def _practise(reader, study, task):
    attempt = next_practice(reader, study, task)
    show_practice(attempt)
    rating = RatingChoice.REALISTIC if task == Task.REALISM else RatingChoice.EQUIVALENT
    submit_practice(reader=reader, attempt_id=attempt.public_id, rating=rating, rationale="", form_token=uuid.uuid4())
    return attempt


def test_a_practice_rating_neither_settles_the_last_rating_nor_is_taken_back(reading):
    study, reader = reading
    import_practice_items(study, practice_file(practice_row(1)), filename="p.csv")
    Study.objects.filter(pk=study.pk).update(practice_items_required=1)
    study.refresh_from_db()
    _practise(reader, study, Task.REALISM)
    first = _first_open(reader)
    rated = _rate(reader, first)
    assert rated.settled_at is None

    # Practice of the other task before its first real item: not a rating of the study.
    attempt = _practise(reader, study, Task.EQUIVALENCE)

    rated.refresh_from_db()
    assert rated.settled_at is None, "a practice rating closed the undo window of a real one"
    assert settle_due_ratings() == 0
    result = undo_last_rating(reader)
    assert result.assignment.pk == first.pk
    assert not Annotation.objects.filter(reader=reader).exists()
    # The practice rating is untouched, and there is nothing more to take back.
    attempt.refresh_from_db()
    assert attempt.is_rated
    assert PracticeAttempt.objects.filter(reader=reader, rated_at__isnull=False).count() == 2
    with pytest.raises(UndoRefused):
        undo_last_rating(reader)
    # The practice round stays done: the item comes back first, without practising again.
    assert pending_step(reader, study, Task.REALISM) is None
    assert next_assignment(reader, task=Task.REALISM, study_id=study.pk).pk == first.pk


def test_after_an_undo_a_changed_guide_is_confirmed_before_the_item(client, reading):
    study, reader = reading
    publish_guide(study, "Version one.", author=None)
    confirm_guide(reader, study, 1)
    client.force_login(reader)
    first = _first_open(reader)
    client.get(reverse("reading_page", args=[first.public_id]))
    data = {"rating": RatingChoice.MINOR_ISSUES, "rationale": "Odd.", "form_token": uuid.uuid4()}
    client.post(reverse("reading_page", args=[first.public_id]), data, **HTMX)
    publish_guide(study, "Version two.", author=None)

    response = client.post(reverse("reading_undo"), **HTMX)

    # Taken back, and the guide's new version comes first (htmx: a client redirect), as before any item.
    assert not Annotation.objects.filter(reader=reader).exists()
    assert response.headers["HX-Redirect"] == reverse("reader_guide", args=[study.slug]) + "?next=realism"
    assert client.get(reverse("reading_page", args=[first.public_id])).status_code == 302
    client.post(reverse("reader_guide", args=[study.slug]), {"version": 2, "next": Task.REALISM})
    page = client.get(reverse("reading_next", args=[study.slug, Task.REALISM]), follow=True).content.decode()
    assert f'data-item="{first.public_id}"' in page
    assert ">Odd.</textarea>" in page and "data-taken-back" in page


def test_without_a_guide_change_undo_shows_the_item_under_the_guide_button(client, reading):
    study, reader = reading
    publish_guide(study, "Version one.", author=None)
    confirm_guide(reader, study, 1)
    client.force_login(reader)
    first = _first_open(reader)
    client.get(reverse("reading_page", args=[first.public_id]))
    data = {"rating": RatingChoice.MINOR_ISSUES, "rationale": "Odd.", "form_token": uuid.uuid4()}
    following = client.post(reverse("reading_page", args=[first.public_id]), data, **HTMX).content.decode()
    # The notice sits in main's reading panel: under the named heading, the study's name and the guide button.
    assert following.index('id="reading-heading"') < following.index('id="saved-notice"')
    assert study.name in following and 'id="saved-notice"' in following

    response = client.post(reverse("reading_undo"), **HTMX)

    assert response.status_code == 200 and "HX-Redirect" not in response.headers
    html = response.content.decode()
    assert 'id="reading-heading"' in html and study.name in html and "data-taken-back" in html


@pytest.mark.parametrize("single_keys", [True, False])
def test_the_u_shortcut_is_offered_only_with_single_key_shortcuts_on(client, reading, single_keys):
    study, reader = reading
    Preferences.objects.create(user=reader, single_key_shortcuts=single_keys)
    client.force_login(reader)
    first = _first_open(reader)
    client.get(reverse("reading_page", args=[first.public_id]))
    data = {"rating": RatingChoice.MINOR_ISSUES, "rationale": "Odd.", "form_token": uuid.uuid4()}
    client.post(reverse("reading_page", args=[first.public_id]), data)

    page = client.get(reverse("reading_next", args=[study.slug, Task.REALISM]), follow=True).content.decode()

    notice = page[page.index('id="saved-notice"') :]
    notice = notice[: notice.index("</div>")]
    assert 'id="undo-button"' in notice
    assert ('aria-keyshortcuts="U"' in notice) is single_keys
    assert ("<kbd>U</kbd>" in notice) is single_keys
    assert (f'data-single-key-shortcuts="{"on" if single_keys else "off"}"') in page
    # The form's key hint names U too, in a study with an undo window.
    assert ("<kbd>U</kbd> undoes your last rating" in page) is single_keys


def test_the_form_names_no_u_key_where_undo_is_off(client, reading):
    study, reader = reading
    Study.objects.filter(pk=study.pk).update(undo_window_seconds=0)
    client.force_login(reader)
    page = client.get(reverse("reading_next", args=[study.slug, Task.REALISM]), follow=True).content.decode()
    assert "<kbd>1</kbd> <kbd>2</kbd> <kbd>3</kbd> choose" in page
    assert "<kbd>U</kbd>" not in page
