"""Every model is in the admin, and its pages load for a superuser."""

import pytest
from django.apps import apps
from django.contrib import admin
from django.test import RequestFactory
from django.urls import reverse

from annotation.models import (
    Assignment,
    CandidatePair,
    Dataset,
    Example,
    ReaderProfile,
    ReportType,
    Role,
    Study,
    Task,
    Variation,
)
from tests.factories import make_assignment, make_example, make_pair, make_study, make_user

APP_LABELS = ("annotation", "consensus", "exports")
MODELS = [model for label in APP_LABELS for model in apps.get_app_config(label).get_models()]


def _label(model) -> str:
    return model._meta.label


def _url(model, view: str, *args) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


@pytest.fixture
def superuser(db):
    return make_user(username="root", is_superuser=True, is_staff=True)


@pytest.fixture
def admin_data(db):
    study = make_study("admin-study")
    pairs = [make_pair(study, variation=key) for key in ("hedging", "terminology")]
    reader = make_user(Role.READER, username="reader-a")
    make_user(Role.ADJUDICATOR, username="adjudicator-a")
    for pair in pairs:
        make_example(pair, task=Task.REALISM, report_type=ReportType.ORIGINAL)
        make_assignment(make_example(pair), reader)
    return study


@pytest.mark.parametrize("model", MODELS, ids=_label)
def test_every_model_is_registered(model):
    assert admin.site.is_registered(model), f"{_label(model)} is not in the admin"


@pytest.mark.parametrize("model", MODELS, ids=_label)
def test_the_changelist_loads(client, superuser, admin_data, model):
    client.force_login(superuser)

    response = client.get(_url(model, "changelist"))

    assert response.status_code == 200


@pytest.mark.parametrize("model", MODELS, ids=_label)
def test_the_add_page_loads_unless_adding_is_refused(client, superuser, admin_data, model):
    client.force_login(superuser)
    request = RequestFactory().get("/")
    request.user = superuser
    may_add = admin.site.get_model_admin(model).has_add_permission(request)

    response = client.get(_url(model, "add"))

    assert response.status_code == (200 if may_add else 403)


@pytest.mark.parametrize(
    "model", [Study, Dataset, Variation, CandidatePair, Example, Assignment, ReaderProfile], ids=_label
)
def test_the_change_page_loads(client, superuser, admin_data, model):
    obj = model._default_manager.first()
    client.force_login(superuser)

    response = client.get(_url(model, "change", obj.pk))

    assert response.status_code == 200


def test_a_coordinator_who_is_not_staff_cannot_reach_the_admin(client, db):
    client.force_login(make_user(Role.COORDINATOR))

    for url in ("/admin/", "/admin/annotation/study/"):
        response = client.get(url)
        assert response.status_code == 302
        assert response.url.startswith("/admin/login/")


def test_the_admin_index_lists_the_apps(client, superuser):
    client.force_login(superuser)

    response = client.get("/admin/")

    assert response.status_code == 200
    for model in MODELS:
        assert _url(model, "changelist") in response.content.decode()
