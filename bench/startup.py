"""How fast ReadingRoom starts, beside an empty Django project on the same machine in the same run.

    .venv/bin/python bench/startup.py [--runs 7] [--demo] [--cold] [--results] [--suite]

- `manage.py check`: ReadingRoom's against an empty Django project's (`django-admin startproject`,
  same interpreter, same Django), run in turns, median wall and CPU time, and their ratio. Beside
  them the same empty project with ReadingRoom's third-party apps, middleware and API settings and
  one API view (DRF, drf-spectacular, django-axes, django-htmx, whitenoise, django-tasks-db): the
  floor that the stack itself sets, before any of ReadingRoom's own code.
- `--demo`: a fresh clone of this repository's HEAD in a temporary folder, then `bin/demo` until it
  answers on its port: wall time from clone to serving, with the install step's own line. Warm
  package caches unless `--cold` (an empty uv cache for the clone, as a first install would have).
- `--results`: the demo study's results, each in a fresh process on a fresh SQLite database (migrate,
  load_demo --with-ratings, export_release): `manage.py analyze_release` on the demo release and
  `manage.py compute_results --study demo` (every table, figure in SVG, PNG and PDF, summary and
  methods), median wall and CPU time of --runs runs and their ratio to the empty project's check
  (targets: at most 10 s and 15x on a quiet machine).
- `--suite`: `bin/test` as CI runs it (HYPOTHESIS_PROFILE=ci) on SQLite and on the PostgreSQL server
  of DATABASE_URL (default postgres://postgres@127.0.0.1:5432/readingroom), and `bin/test --fast`
  on SQLite: wall time of each.

Prints the load average before and after: the machine is shared, and the ratios are what compare.
"""

import argparse
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def timed(command: list[str], *, cwd: Path, env: dict | None = None) -> tuple[float, float]:
    """Wall and CPU seconds (children's user + system) of one command, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # The benchmark runs this project's own commands and Django's, with arguments it builds itself.
    subprocess.run(command, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


# Appended to the empty project's settings and URLconf: ReadingRoom's third-party stack, no code of its own.
STACK_SETTINGS = """
INSTALLED_APPS += [
    "rest_framework", "drf_spectacular", "drf_spectacular_sidecar",
    "django_htmx", "axes", "django_tasks_db",
]
MIDDLEWARE.insert(1, "whitenoise.middleware.WhiteNoiseMiddleware")
MIDDLEWARE += ["django_htmx.middleware.HtmxMiddleware", "axes.middleware.AxesMiddleware"]
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
"""
STACK_URLS = """
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.routers import DefaultRouter
from rest_framework.viewsets import ViewSet


class PingViewSet(ViewSet):
    @extend_schema(responses={200: None})
    def list(self, request):
        return Response({})


router = DefaultRouter()
router.register("ping", PingViewSet, basename="ping")
urlpatterns += [path("api/", include(router.urls))]
"""


def project(folder: Path, name: str, *, stack: bool) -> Path:
    """A new Django project (startproject), with ReadingRoom's third-party stack if stack."""
    where = folder / name
    where.mkdir()
    subprocess.run([PYTHON, "-m", "django", "startproject", "site_" + name, str(where)], check=True)
    if stack:
        package = where / ("site_" + name)
        with open(package / "settings.py", "a") as settings:
            settings.write(STACK_SETTINGS)
        urls = (package / "urls.py").read_text()
        urls = urls.replace("from django.urls import path", "from django.urls import include, path")
        (package / "urls.py").write_text(urls + STACK_URLS)
    return where


def check_against_empty_project(runs: int) -> float:
    with tempfile.TemporaryDirectory() as folder:
        empty = project(Path(folder), "empty", stack=False)
        floor = project(Path(folder), "stack", stack=True)
        ours_env = {**os.environ, "DEBUG": "1", "DJANGO_SETTINGS_MODULE": "config.settings"}
        ours_env.pop("DATABASE_URL", None)
        empty_env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
        where = {"readingroom": (ROOT, ours_env), "empty project": (empty, empty_env), "stack only": (floor, empty_env)}
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in where}
        for _ in range(runs):
            for name, (cwd, env) in where.items():
                times[name].append(timed([PYTHON, "manage.py", "check"], cwd=cwd, env=env))
    medians = {
        name: (statistics.median(w for w, _ in values), statistics.median(c for _, c in values))
        for name, values in times.items()
    }
    print(f"manage.py check, median of {runs} runs in turns:")
    for name, (wall, cpu) in medians.items():
        print(f"  {name:<14} wall {wall:6.2f} s   CPU {cpu:6.2f} s")
    ours = medians["readingroom"]
    for peer, note in (("empty project", "   (target: at most 1.5)"), ("stack only", "")):
        wall_ratio, cpu_ratio = ours[0] / medians[peer][0], ours[1] / medians[peer][1]
        print(f"  ratio to {peer:<13} wall {wall_ratio:5.2f}   CPU {cpu_ratio:5.2f}{note}")
    return medians["empty project"][0]


def demo_results(runs: int, empty_check: float) -> None:
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "DEBUG": "1", "LOG_LEVEL": "WARNING", "DATABASE_URL": f"sqlite:///{folder}/db.sqlite3"}
        env["READINGROOM_RESULTS_DIR"] = f"{folder}/results"
        manage = [PYTHON, "manage.py"]
        for command in (["migrate"], ["load_demo", "--with-ratings"]):
            subprocess.run(manage + command, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
        release = f"{folder}/release"
        export = [*manage, "export_release", "--study", "demo", "--out", release, "--no-progress"]
        subprocess.run(export, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
        commands = {
            "analyze_release (demo release)": lambda n: [*manage, "analyze_release", release, "--out", f"{folder}/{n}"],
            "compute_results --study demo": lambda n: [*manage, "compute_results", "--study", "demo"],
        }
        for name, command in commands.items():
            times = []
            for n in range(runs):
                shutil.rmtree(f"{folder}/results", ignore_errors=True)  # nothing computed before
                times.append(timed(command(n), cwd=ROOT, env=env))
            wall, cpu = statistics.median(w for w, _ in times), statistics.median(c for _, c in times)
            print(f"  {name:<32} wall {wall:6.2f} s   CPU {cpu:6.2f} s   {wall / empty_check:5.1f}x the empty check"
                  "   (targets: 10 s, 15x)")  # fmt: skip


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def demo_from_a_fresh_clone(*, cold: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        clone = Path(folder) / "readingroom"
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "VIRTUAL_ENV", "DEBUG")}
        if cold:
            env["UV_CACHE_DIR"] = str(Path(folder) / "uv-cache")
            env["PIP_NO_CACHE_DIR"] = "1"
        port = free_port()
        start = time.perf_counter()
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        log = open(Path(folder) / "demo.log", "w")  # noqa: SIM115 (open while the server runs)
        demo = subprocess.Popen(
            ["bin/demo", str(port)], cwd=clone, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            while True:
                if demo.poll() is not None:
                    raise SystemExit(f"bin/demo stopped: see {log.name}\n" + Path(log.name).read_text()[-2000:])
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=2):
                        break
                except OSError:
                    time.sleep(0.5)
            wall = time.perf_counter() - start
        finally:
            os.killpg(demo.pid, 15)
            demo.wait(timeout=60)
            log.close()
        installed = [line for line in Path(log.name).read_text().splitlines() if line.startswith("Installed ")]
        set_up = [line for line in Path(log.name).read_text().splitlines() if line.startswith("Set up ")]
    caches = "empty package caches" if cold else "warm package caches"
    print(f"bin/demo from a fresh clone to serving ({caches}): {wall:.1f} s")
    for line in installed + set_up:
        print(f"  {line}")


def suite() -> None:
    url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/readingroom")
    base = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    runs = {
        "bin/test on SQLite (HYPOTHESIS_PROFILE=ci)": ([], {**base, "HYPOTHESIS_PROFILE": "ci"}),
        "bin/test on PostgreSQL (HYPOTHESIS_PROFILE=ci)": (
            [],
            {**base, "HYPOTHESIS_PROFILE": "ci", "DATABASE_URL": url},
        ),
        "bin/test --fast on SQLite": (["--fast"], base),
    }
    total = 0.0
    for name, (extra, env) in runs.items():
        wall, cpu = timed(["bin/test", *extra, "-q", "-p", "no:cacheprovider"], cwd=ROOT, env=env)
        if "--fast" not in extra:
            total += wall
        print(f"  {name:<48} wall {wall / 60:5.1f} min   CPU {cpu / 60:5.1f} min   load {load()}")
    print(f"  the whole suite on both databases, as .ci/run:   {total / 60:5.1f} min (target: at most 12)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--demo", action="store_true")
    parser.add_argument("--cold", action="store_true")
    parser.add_argument("--suite", action="store_true")
    parser.add_argument("--results", action="store_true")
    options = parser.parse_args()
    print(f"load average before: {load()}   ({os.cpu_count()} cores)")
    empty_check = check_against_empty_project(options.runs)
    if options.results:
        demo_results(min(options.runs, 3), empty_check)
    if options.demo or options.cold:
        demo_from_a_fresh_clone(cold=options.cold)
    if options.suite:
        suite()
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
