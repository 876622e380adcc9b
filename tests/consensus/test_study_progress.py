import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Example, RatingChoice, Role, Study, Task
from tests.factories import make_reading_study, make_study, make_user, rate_open_reads

HTMX = {"HTTP_HX_REQUEST": "true"}

pytestmark = pytest.mark.django_db


def _url(study) -> str:
    return reverse("study_progress", args=[study.slug])


def _examples(study, task: str) -> list[Example]:
    return list(Example.objects.filter(study=study, task=task).order_by("pk"))


def _row(progress, task: str, variation: str):
    (task_progress,) = [t for t in progress.tasks if t.task == task]
    (row,) = [r for r in task_progress.variations if r.variation == variation]
    return row


def test_it_counts_examples_by_state_per_task_and_variation(client, coordinator):
    study, _, _ = make_reading_study(pairs=2)
    agreed, split, *_ = _examples(study, Task.REALISM)
    rate_open_reads(agreed, RatingChoice.REALISTIC, RatingChoice.REALISTIC)
    rate_open_reads(split, RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES)
    client.force_login(coordinator)

    response = client.get(_url(study))

    assert response.status_code == 200
    progress = response.context["progress"]
    assert [t.task for t in progress.tasks] == [Task.REALISM, Task.EQUIVALENCE]
    realism = progress.tasks[0]
    assert (realism.total.waiting, realism.total.third_read, realism.total.consensus, realism.total.total) == (
        2,
        1,
        1,
        4,
    )
    assert realism.total.percent_done == 25
    # Both Task 1 examples of the first pair share its variation.
    row = _row(progress, Task.REALISM, agreed.pair.variation.key)
    assert (row.waiting, row.third_read, row.adjudication, row.consensus) == (0, 1, 0, 1)
    equivalence = progress.tasks[1]
    assert (equivalence.total.waiting, equivalence.total.total) == (2, 2)
    assert progress.overall.total == 6
    assert progress.overall.consensus == 1


def test_it_lists_variations_in_taxonomy_order(client, coordinator):
    study, _, _ = make_reading_study(pairs=3)
    client.force_login(coordinator)

    progress = client.get(_url(study)).context["progress"]

    keys = [row.variation for row in progress.tasks[0].variations]
    assert keys == ["structure--structured", "structure--free_text", "section_assignment"]


def test_it_draws_a_progress_bar_for_every_row(client, coordinator):
    study, _, _ = make_reading_study(pairs=2)
    rate_open_reads(_examples(study, Task.EQUIVALENCE)[0], RatingChoice.EQUIVALENT, RatingChoice.EQUIVALENT)
    client.force_login(coordinator)

    html = client.get(_url(study)).content.decode()

    bars = re.findall(r"<progress value=\"(\d+)\" max=\"(\d+)\"", html)
    # Two variation rows and a total per task, and the study's total.
    assert len(bars) == 2 * 3 + 1
    assert ("1", "1") in bars  # the Task 2 row of the agreed example's variation
    assert ("1", "6") in bars  # the study
    assert "Waiting for reads" in html and "Needs a third read" in html
    assert "Needs adjudication" in html and "Has consensus" in html


def test_it_links_the_unrouted_count_to_the_unrouted_list(client, coordinator):
    study, _, _ = make_reading_study(pairs=1, readers=2, keep_versions_apart=False)
    rate_open_reads(_examples(study, Task.REALISM)[0], RatingChoice.REALISTIC, RatingChoice.MAJOR_ISSUES)
    client.force_login(coordinator)

    response = client.get(_url(study))

    assert response.context["progress"].unrouted == 1
    assert f'href="{reverse("study_unrouted", args=[study.slug])}"' in response.content.decode()
    assert b"1 example waits for an eligible reader or adjudicator" in response.content


def test_the_table_polls_for_fresh_counts(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    client.force_login(coordinator)

    html = client.get(_url(study)).content.decode()

    (div,) = re.findall(r'<div id="progress-table"[^>]*>', html)
    assert f'hx-get="{_url(study)}"' in div
    assert 'hx-trigger="every 15s"' in div
    assert 'hx-swap="outerHTML"' in div


def test_htmx_gets_the_table_alone(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    client.force_login(coordinator)

    response = client.get(_url(study), **HTMX)

    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="progress-table"')
    assert "<html" not in html
    assert "<h1>" not in html
    assert 'hx-trigger="every 15s"' in html


def test_the_page_has_no_inline_style_or_script(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    client.force_login(coordinator)

    html = client.get(_url(study)).content.decode()

    assert "style=" not in html
    assert all("src=" in attributes for attributes in re.findall(r"<script([^>]*)>", html))


def test_it_says_so_when_nothing_is_sampled(client, coordinator):
    study = make_study()
    client.force_login(coordinator)

    response = client.get(_url(study))

    assert response.status_code == 200
    assert b"No examples yet" in response.content


def test_it_links_to_the_other_study_pages(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    client.force_login(coordinator)

    html = client.get(_url(study)).content.decode()

    for name in ("study_detail", "study_readers", "study_unrouted"):
        assert f'href="{reverse(name, args=[study.slug])}"' in html
    assert f'href="{_url(study)}" aria-current="page"' in html


def test_the_study_page_links_here(client, coordinator):
    study = make_study()
    client.force_login(coordinator)

    html = client.get(reverse("study_detail", args=[study.slug])).content.decode()

    assert f'href="{_url(study)}"' in html
    assert f'href="{reverse("study_readers", args=[study.slug])}"' in html


def test_its_query_count_does_not_grow_with_the_study(client, coordinator):
    client.force_login(coordinator)
    counts = []
    for pairs in (2, 12):
        study, _, _ = make_reading_study(pairs=pairs)
        for example in _examples(study, Task.REALISM)[:2]:
            rate_open_reads(example, RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES)
        client.get(_url(study))  # warm the session and permission caches
        with CaptureQueriesContext(connection) as queries:
            response = client.get(_url(study))
        assert response.status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1], counts
    # One of them asks how many readers the study's exams need (consensus.blinding.readers_needed),
    # for the note on examples nobody has yet.
    assert counts[1] <= 9, counts


@pytest.mark.parametrize("role", [Role.READER, Role.ADJUDICATOR, Role.DATA_MANAGER])
def test_it_requires_the_coordinator_role(client, role):
    study, _, _ = make_reading_study(pairs=1)
    client.force_login(make_user(role))

    assert client.get(_url(study)).status_code == 403
    assert client.get(_url(study), **HTMX).status_code == 403


def test_it_redirects_anonymous_users_to_login(client):
    study = make_study()

    response = client.get(_url(study))

    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


def test_it_404s_for_an_unknown_study(client, coordinator):
    client.force_login(coordinator)

    assert client.get(reverse("study_progress", args=["nope"])).status_code == 404


def test_every_number_links_to_the_examples_it_counts(client, coordinator):
    study, _, _ = make_reading_study(pairs=2)
    client.force_login(coordinator)

    html = client.get(reverse("study_progress", args=[study.slug])).content.decode()

    link = re.search(
        r'<a href="(/studies/[^"]+/examples/\?task=realism&amp;variation=([^&]+)&amp;state=waiting)">(\d+)'
        r'<span class="visually-hidden"> ([^<]+)</span></a>',
        html,
    )
    assert link, "no linked Task 1 waiting cell"
    url, variation, count = link.group(1).replace("&amp;", "&"), link.group(2), int(link.group(3))
    # The link's name says what it counts: no two links of the table share a name.
    assert link.group(4).startswith("waiting for reads: ") and link.group(4).endswith(", Task 1: Realism")
    listed = client.get(url).content.decode()
    examples = Example.objects.filter(study=study, task=Task.REALISM, pair__variation__key=variation, state="waiting")
    assert examples.count() == count
    for example in examples:
        assert reverse("example_detail", args=[study.slug, example.public_id]) in listed
    assert listed.count('href="/studies/' + study.slug + "/examples/") == count


def test_the_examples_list_refuses_unknown_filters_and_other_roles(client, coordinator):
    study, readers, _ = make_reading_study(pairs=1)
    url = reverse("study_examples", args=[study.slug])
    client.force_login(coordinator)
    assert client.get(url + "?state=nonsense").status_code == 404
    assert client.get(url + "?task=ranking").status_code == 404
    client.force_login(readers[0])
    assert client.get(url).status_code == 403


def test_the_examples_list_query_count_does_not_grow_with_the_study(client, coordinator):
    client.force_login(coordinator)
    counts = []
    for pairs in (1, 6):
        study, _, _ = make_reading_study(pairs=pairs)
        url = reverse("study_examples", args=[study.slug])
        client.get(url)
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1] <= 8, counts


def test_it_says_which_examples_wait_for_a_rating_to_settle(client, coordinator):
    study, _, _ = make_reading_study(pairs=2)
    Study.objects.filter(pk=study.pk).update(undo_window_seconds=120)
    study.refresh_from_db()
    split, agreed, *_ = _examples(study, Task.REALISM)
    rate_open_reads(split, RatingChoice.REALISTIC, RatingChoice.MINOR_ISSUES)
    # Its second rating is still in its undo window: the example waits for it, not yet for a third read.
    client.force_login(coordinator)

    response = client.get(_url(study))
    html = response.content.decode()

    assert response.context["progress"].overall.settling == 1
    assert "1 example has a rating still in its reader's undo window (120 seconds" in html
    api = client.get(f"/api/studies/{study.slug}/progress/").json()
    assert api["overall"]["settling"] == 1
    assert agreed.pk


def test_no_note_when_every_rating_has_settled(client, coordinator):
    study, _, _ = make_reading_study(pairs=1)
    rate_open_reads(_examples(study, Task.REALISM)[0], RatingChoice.REALISTIC, RatingChoice.REALISTIC)
    client.force_login(coordinator)

    assert "undo window" not in client.get(_url(study)).content.decode()
