"""The coordinator's upload form on the study page (htmx fragment, or the whole page without JS)."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils.html import escape

from annotation.importing import ImportRejected
from annotation.models import CandidatePair, Role, Study
from annotation.services import import_pairs
from tests.factories import csv_bytes, csv_row, make_pair, make_user

HTMX = {"HX-Request": "true"}


@pytest.fixture
def coordinator_client(client, coordinator):
    client.force_login(coordinator)
    return client


def _post(client, study: Study, data: bytes, *, name: str = "pairs.csv", headers: dict | None = None, **fields):
    url = reverse("study_import", args=[study.slug])
    return client.post(url, {"file": SimpleUploadedFile(name, data), **fields}, headers=headers or {})


def _problems(study: Study, data: bytes, name: str = "pairs.csv") -> list[str]:
    with pytest.raises(ImportRejected) as caught:
        import_pairs(study, data, filename=name)
    return [str(problem) for problem in caught.value.problems]


def test_it_imports_and_returns_the_fragment(coordinator_client, study):
    response = _post(coordinator_client, study, csv_bytes([csv_row(), csv_row()]), headers=HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="import-panel"' in html
    assert "<html" not in html
    assert '<div class="success" role="status">' in html
    assert "<p>Imported 2 new pairs.</p>" in html
    assert CandidatePair.objects.filter(study=study).count() == 2


def test_it_updates_the_summary_table_out_of_band(coordinator_client, study):
    rows = [csv_row(), csv_row(), csv_row(verdict="rejected", reref_variation="terminology")]
    response = _post(coordinator_client, study, csv_bytes(rows), headers=HTMX)
    html = response.content.decode()
    assert html.count('<div id="summary" hx-swap-oob="true">') == 1
    assert "<td>mimic-cxr</td><td><code>hedging</code></td>" in html
    assert "<td>mimic-cxr</td><td><code>terminology</code></td>" in html


def test_it_lists_every_problem_and_imports_nothing(coordinator_client, study):
    data = csv_bytes([csv_row(), csv_row(verdict="maybe"), csv_row(dataset="mimic", reref_variation="nope")])
    expected = _problems(study, data)
    assert len(expected) == 3
    response = _post(coordinator_client, study, data, headers=HTMX)
    assert response.status_code == 422
    html = response.content.decode()
    assert 'id="import-panel"' in html
    assert "<html" not in html
    assert "Nothing was imported." in html
    for problem in expected:
        assert f"<li>{escape(problem)}</li>" in html
    assert "hx-swap-oob" not in html
    assert not CandidatePair.objects.exists()


def test_it_lists_file_level_problems(coordinator_client, study):
    data = csv_bytes([csv_row()]) + b"mimic-cxr,\xe9\r\n"
    expected = _problems(study, data)
    response = _post(coordinator_client, study, data, headers=HTMX)
    assert response.status_code == 422
    assert f"<li>{escape(expected[0])}</li>" in response.content.decode()
    assert "line 3: Byte 0xe9 is not valid UTF-8" in expected[0]


def test_it_escapes_the_files_text_in_problems(coordinator_client, study):
    response = _post(
        coordinator_client, study, csv_bytes([csv_row(reref_variation="<script>x</script>")]), headers=HTMX
    )
    assert response.status_code == 422
    html = response.content.decode()
    assert "Unknown variation &#x27;&lt;script&gt;x&lt;/script&gt;&#x27;" in html
    assert "<script>x</script>" not in html


def test_a_dry_run_imports_nothing(coordinator_client, study):
    response = _post(coordinator_client, study, csv_bytes([csv_row(), csv_row()]), headers=HTMX, dry_run="on")
    assert response.status_code == 200
    assert "Would import 2 new pairs." in response.content.decode()
    assert not CandidatePair.objects.exists()


def test_it_says_when_a_reimport_changes_nothing(coordinator_client, study):
    data = csv_bytes([csv_row()])
    _post(coordinator_client, study, data, headers=HTMX)
    response = _post(coordinator_client, study, data, headers=HTMX)
    assert response.status_code == 200
    assert "Nothing to import: all 1 pairs in the file are already stored, unchanged." in response.content.decode()
    assert CandidatePair.objects.count() == 1


def test_it_reads_jsonl_by_the_file_name(coordinator_client, study):
    data = b'{"dataset": "mimic-cxr"}\n'
    response = _post(coordinator_client, study, data, name="pairs.jsonl", headers=HTMX)
    assert response.status_code == 422
    assert "line 1, field &#x27;study_id&#x27;: Required column" in response.content.decode()


def test_it_renders_the_whole_page_without_htmx(coordinator_client, study):
    make_pair(study)
    response = _post(coordinator_client, study, csv_bytes([csv_row()]))
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" in html
    assert html.count('id="import-panel"') == 1
    assert "Imported 1 new pair." in html
    # The summary is shown once, in its place: nothing out of band on a full page.
    assert html.count('id="summary"') == 1
    assert "hx-swap-oob" not in html
    assert '<td class="num">2</td>' in html


def test_it_renders_problems_in_the_whole_page_without_htmx(coordinator_client, study):
    response = _post(coordinator_client, study, csv_bytes([csv_row(verdict="maybe")]))
    assert response.status_code == 422
    html = response.content.decode()
    assert "<html" in html
    assert "Invalid verdict &#x27;maybe&#x27;" in html
    assert not CandidatePair.objects.exists()


def test_it_requires_a_file(coordinator_client, study):
    response = coordinator_client.post(reverse("study_import", args=[study.slug]), {}, headers=HTMX)
    assert response.status_code == 422
    assert "This field is required." in response.content.decode()


def test_it_rejects_an_empty_upload(coordinator_client, study):
    response = _post(coordinator_client, study, b"", headers=HTMX)
    assert response.status_code == 422
    assert "The submitted file is empty." in response.content.decode()
    assert not CandidatePair.objects.exists()


def test_it_404s_for_an_unknown_study(coordinator_client):
    response = coordinator_client.post(reverse("study_import", args=["nope"]), {}, headers=HTMX)
    assert response.status_code == 404


def test_it_requires_the_coordinator_role(client, reader, study):
    client.force_login(reader)
    response = _post(client, study, csv_bytes([csv_row()]), headers=HTMX)
    assert response.status_code == 403
    assert not CandidatePair.objects.exists()


def test_it_redirects_anonymous_users_to_log_in(client, study):
    url = reverse("study_import", args=[study.slug])
    response = _post(client, study, csv_bytes([csv_row()]))
    assert response.status_code == 302
    assert response.url == f"{reverse('login')}?next={url}"
    assert not CandidatePair.objects.exists()


def test_a_dry_run_offers_to_import_the_same_file_now(coordinator_client, study):
    data = csv_bytes([csv_row(), csv_row()])

    response = _post(coordinator_client, study, data, headers=HTMX, dry_run="on")

    html = response.content.decode()
    assert "Would import 2 new pairs." in html
    assert 'name="import_now"' in html
    # Only the result is swapped (the form, and the file chosen in it, stay in the page).
    assert "<form" not in html.split('id="import-panel"', 1)[1]
    assert not CandidatePair.objects.exists()

    # The button sends the same form, dry run still ticked, and imports.
    response = _post(coordinator_client, study, data, headers=HTMX, dry_run="on", import_now="1")

    assert "Imported 2 new pairs." in response.content.decode()
    assert CandidatePair.objects.filter(study=study).count() == 2


def test_a_dry_run_that_would_import_nothing_offers_nothing(coordinator_client, study):
    data = csv_bytes([csv_row()])
    import_pairs(study, data, filename="pairs.csv")
    response = _post(coordinator_client, study, data, headers=HTMX, dry_run="on")
    assert "Nothing to import" in response.content.decode()
    assert 'name="import_now"' not in response.content.decode()


def test_a_missing_file_is_named_in_place(coordinator_client, study):
    url = reverse("study_import", args=[study.slug])
    response = coordinator_client.post(url, {}, headers=HTMX)
    assert response.status_code == 422
    assert "Candidate pairs file: This field is required." in response.content.decode()


def test_the_page_lists_the_columns_and_offers_an_example_file(coordinator_client, study):
    html = coordinator_client.get(study.get_absolute_url()).content.decode()
    assert "See the README" not in html
    for column in ("dataset", "study_id", "reref_variation", "verdict", "alternative_impression"):
        assert f"<code>{column}</code>" in html
    assert reverse("example_pairs_file") in html

    response = coordinator_client.get(reverse("example_pairs_file"))

    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="example_pairs.csv"'
    body = b"".join(response.streaming_content)
    assert body.startswith(b"dataset,study_id,reref_variation,verdict,")
    # The example file imports as it is.
    assert import_pairs(study, body, filename="example_pairs.csv").created > 0


def test_the_example_file_is_for_coordinators(client, study):
    client.force_login(make_user(Role.READER))
    assert client.get(reverse("example_pairs_file")).status_code == 403


@pytest.mark.parametrize("name", ["study_import", "study_sample", "study_import_rewrites"])
def test_a_get_of_a_form_address_goes_to_the_form(coordinator_client, study, name):
    response = coordinator_client.get(reverse(name, args=[study.slug]))
    assert response.status_code == 302
    assert response["Location"].startswith(study.get_absolute_url() + "#")
