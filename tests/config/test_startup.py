"""Nothing scientific at start-up: every command and web worker pays for what it imports.

A fresh interpreter sets Django up, loads the admin and resolves every URL pattern to its view (what a
web worker does before its first request, and `manage.py check` before anything), then looks at what
was imported. pandas, numpy, scipy, statsmodels, matplotlib and the metric packages load on first use,
in the worker that computes results or in a command (analysis.computing).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCIENTIFIC = (
    "pandas",
    "numpy",
    "scipy",
    "statsmodels",
    "matplotlib",
    "krippendorff",
    "nltk",
    "rouge_score",
    "sacrebleu",
)

PROBE = """
import json, sys
import django
django.setup()
from django.contrib import admin
from django.urls import URLPattern, URLResolver, get_resolver

admin.autodiscover()

def walk(patterns):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from walk(pattern.url_patterns)
        else:
            yield pattern

views = [pattern.callback for pattern in walk(get_resolver().url_patterns)]
print(json.dumps({"views": len(views), "modules": sorted(name.split(".")[0] for name in sys.modules)}))
"""


COMPUTING_PROBE = """
import json, sys
import django
django.setup()
import analysis.computing
print(json.dumps({"views": 0, "modules": sorted(name.split(".")[0] for name in sys.modules)}))
"""


def _start_up(probe: str = PROBE, **environment: str) -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "1", **environment}
    # The project's own interpreter, on a fixed probe script.
    done = subprocess.run(  # noqa: S603
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_setting_up_django_and_resolving_every_url_imports_nothing_scientific():
    started = _start_up()

    assert started["views"] > 100  # every URL pattern of the project was resolved to its view
    assert sorted(set(SCIENTIFIC) & set(started["modules"])) == []


def test_the_probe_sees_a_scientific_import_when_there_is_one():
    # The probe is not blind: a settings module that imports pandas is seen.
    started = _start_up(DJANGO_SETTINGS_MODULE="tests.config.settings_importing_pandas")

    assert "pandas" in started["modules"]


def test_the_results_computation_loads_neither_the_postgresql_driver_on_sqlite_nor_a_metric_package():
    # The driver where the database is PostgreSQL only (0.1 s); sacrebleu and rouge-score only when a
    # text's scores are not in the metric cache (analysis.metrics).
    loaded = _start_up(COMPUTING_PROBE, DATABASE_URL="sqlite:///:memory:")["modules"]

    assert {"pandas", "scipy"} <= set(loaded)
    assert sorted({"psycopg", "sacrebleu", "rouge_score", "nltk"} & set(loaded)) == []


def test_the_results_computation_leaves_the_drawing_code_to_the_processes_that_draw():
    # analysis.figure_jobs describes, keys and writes the figures; matplotlib loads where one is drawn
    # (in the processes that compute_results and analyze_release start before the statistics load).
    loaded = _start_up(
        COMPUTING_PROBE.replace("import analysis.computing", "import analysis.computing, analysis.report")
    )

    assert "scipy" in loaded["modules"]
    assert sorted({"matplotlib", "PIL", "fontTools"} & set(loaded["modules"])) == []


DRAWING_PROBE = """
import json, sys
import django
django.setup()
from analysis import figure_jobs
for module in figure_jobs.DRAWING_MODULES:
    __import__(module)
print(json.dumps({"views": 0, "modules": sorted(name.split(".")[0] for name in sys.modules)}))
"""


def test_the_drawing_code_loads_no_statistics():
    # What a process that draws imports before its first figure (figure_jobs._ready_to_draw), and what
    # unpickling a figure's data (analysis.result_data) needs: matplotlib, not scipy or statsmodels.
    loaded = _start_up(DRAWING_PROBE)["modules"]

    assert "matplotlib" in loaded
    assert sorted({"scipy", "statsmodels", "krippendorff"} & set(loaded)) == []
