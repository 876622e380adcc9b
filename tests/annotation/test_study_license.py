"""The study's licence: set on its page by a coordinator (audited), shown by the release form before a build."""

import pytest
from django.urls import reverse

from annotation.models import AuditAction, AuditEvent, Role, Study
from tests.factories import make_study, make_user

pytestmark = pytest.mark.django_db

LICENSE = "Creative Commons Attribution 4.0\n\n  Indented line kept as is.\n"


def test_a_coordinator_sets_the_licence_on_the_study_page_and_it_is_audited(client):
    study = make_study("s1")
    coordinator = make_user(Role.COORDINATOR)
    client.force_login(coordinator)
    page = client.get(reverse("study_detail", args=["s1"])).content.decode()
    assert "This study has no licence yet" in page
    assert 'action="/studies/s1/license/"' in page

    response = client.post("/studies/s1/license/", {"license_text": LICENSE}, HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    assert "Saved: the study's releases ship this licence." in response.content.decode()
    assert Study.objects.get(pk=study.pk).license_text == LICENSE  # exactly as given
    [event] = AuditEvent.objects.filter(study=study, action=AuditAction.LICENSE_CHANGED)
    assert (event.actor, event.before, event.after) == (coordinator, {"license_text": ""}, {"license_text": LICENSE})
    # The same text again changes nothing and writes no second event.
    client.post("/studies/s1/license/", {"license_text": LICENSE})
    assert AuditEvent.objects.filter(study=study, action=AuditAction.LICENSE_CHANGED).count() == 1


def test_the_release_form_says_before_a_build_which_licence_it_will_use(client):
    study = make_study("s1")
    client.force_login(make_user(Role.DATA_MANAGER))
    empty = client.get(reverse("release_list", args=["s1"])).content.decode()
    assert "This study has no licence yet: paste the licence of this release here" in empty

    study.set_license(LICENSE, actor=None)
    given = client.get(reverse("release_list", args=["s1"])).content.decode()

    assert "The study's licence, written to LICENSE.txt exactly as shown" in given
    assert "Creative Commons Attribution 4.0" in given
