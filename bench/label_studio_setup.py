"""Set up Label Studio with the reading benchmark's study shape, for bench/reading.py --label-studio.

Runs inside Label Studio's own environment (its Django, its models), never ReadingRoom's:

    cd <label-studio venv>/lib/python3.12/site-packages/label_studio
    DJANGO_SETTINGS_MODULE=core.settings.label_studio DJANGO_DB=default POSTGRE_NAME=readingroom_bench_ls \\
        POSTGRE_HOST=127.0.0.1 POSTGRE_USER=postgres POSTGRE_PASSWORD= \\
        <label-studio venv>/bin/python manage.py shell -c "exec(open('<repo>/bench/label_studio_setup.py').read())"

The arguments come from the environment: BENCH_PAIRS (50000), BENCH_READERS (20) and BENCH_OUT (the
JSON file it writes: the two projects' ids and the readers' API tokens). It makes one organization,
the readers (each with a legacy API token, the kind a program sends as "Authorization: Token ..."),
and two projects like ReadingRoom's two tasks: Realism (one report per task, two per pair: the
original and the rewrite) and Clinical Equivalence (both reports per task), each with the same
three ratings and a rationale box, two annotations per task (maximum_annotations = 2, as
ReadingRoom's two readers per example) and sequential sampling. Tasks are inserted in bulk, as
bench/generate_study.py inserts ReadingRoom's pairs.
"""

import json
import os
import time

from django.db import transaction
from organizations.models import Organization
from projects.models import Project
from rest_framework.authtoken.models import Token
from tasks.models import Task
from users.models import User

PAIRS = int(os.environ.get("BENCH_PAIRS", "50000"))
READERS = int(os.environ.get("BENCH_READERS", "20"))
OUT = os.environ["BENCH_OUT"]
BATCH = 5000


def label_config(texts: tuple[str, ...], ratings: tuple[str, ...]) -> str:
    """A labeling view: the report text(s), one rating of three (required) and a rationale box."""
    shown = "".join(f'<Text name="{name}" value="${name}"/>' for name in texts)
    choices = "".join(f'<Choice value="{rating}"/>' for rating in ratings)
    return (
        f'<View>{shown}<Choices name="rating" toName="{texts[0]}" choice="single" required="true">{choices}'
        f'</Choices><TextArea name="rationale" toName="{texts[0]}"/></View>'
    )


REALISM_CONFIG = label_config(("report",), ("Realistic", "Minor Issues", "Major Issues"))
EQUIVALENCE_CONFIG = label_config(("report_a", "report_b"), ("Equivalent", "Minor Discrepancy", "Major Discrepancy"))
FINDINGS = "The lungs are clear. No pleural effusion or pneumothorax. Heart size is normal. Case {n}."
REWRITE = "Clear lungs without effusion or pneumothorax; normal heart size. Case {n}."

started = time.perf_counter()
owner = User.objects.create_user(email="owner@bench.invalid", password=None, username="owner")
organization = Organization.create_organization(created_by=owner, title="Reading benchmark")
owner.active_organization = organization
owner.save(update_fields=["active_organization"])
if hasattr(organization, "jwt"):
    # Programs send the legacy token ("Authorization: Token ..."), as ReadingRoom's clients do.
    organization.jwt.legacy_api_tokens_enabled = True
    organization.jwt.save()
tokens = []
for number in range(READERS):
    reader = User.objects.create_user(email=f"reader{number}@bench.invalid", password=None, username=f"reader{number}")
    organization.add_user(reader)
    reader.active_organization = organization
    reader.save(update_fields=["active_organization"])
    tokens.append(Token.objects.get_or_create(user=reader)[0].key)

projects = {}
for name, config in (("realism", REALISM_CONFIG), ("equivalence", EQUIVALENCE_CONFIG)):
    project = Project.objects.create(
        title=f"Bench {name}",
        label_config=config,
        organization=organization,
        created_by=owner,
        maximum_annotations=2,
        sampling=Project.SEQUENCE,
        show_skip_button=False,
    )
    projects[name] = project


def tasks():
    for n in range(PAIRS):
        original, rewrite = FINDINGS.format(n=n), REWRITE.format(n=n)
        yield Task(project=projects["realism"], data={"report": original})
        yield Task(project=projects["realism"], data={"report": rewrite})
        yield Task(project=projects["equivalence"], data={"report_a": original, "report_b": rewrite})


batch = []
for task in tasks():
    batch.append(task)
    if len(batch) == BATCH:
        with transaction.atomic():
            Task.objects.bulk_create(batch)
        batch = []
if batch:
    Task.objects.bulk_create(batch)
for project in projects.values():
    project.update_tasks_states(
        maximum_annotations_changed=True, overlap_cohort_percentage_changed=False, tasks_number_changed=True
    )

with open(OUT, "w") as out:
    json.dump({"projects": {name: p.pk for name, p in projects.items()}, "tokens": tokens}, out)
print(f"Label Studio set up: {PAIRS} pairs, {READERS} readers, in {time.perf_counter() - started:.1f} s")
