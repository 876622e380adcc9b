"""Results page benchmark: the worker's computation of a study's results next to analyze_release on its release.

    .venv/bin/python bench/results_page.py [--pairs 100000] [--database-url postgres://postgres@127.0.0.1:5432/readingroom_release_bench]
        [--keep]   # reuse the database if it already holds the generated study

On a study of N pairs rated to consensus (bench/generate_study.py --with-ratings; the release
benchmark's database is reused with --keep), each in a process of its own so that only its own
memory counts:
- `manage.py compute_results --study bench`: what the worker does for the Results page (the
  rows as the release's DataFrames, analyze(), tables, figures, zip, reader quality);
- `manage.py export_release` then `manage.py analyze_release` on that release (the command line);
- the Results page and the API answered from the computed results (a request never analyses).
Prints wall time and peak resident memory, the load average, and the ratios. Targets: the
computation and analyze_release under 30 s and 1 GB each; the page and the API well under 1 s.
"""

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable

# Run in a child process: log in as a coordinator and time the page and the API on computed results.
REQUESTS = """
import time
import django
django.setup()
from django.test import Client
from django.contrib.auth import get_user_model
from annotation.models import Role
from annotation.roles import grant_role
user, _ = get_user_model().objects.get_or_create(username="bench-coordinator")
grant_role(user, Role.COORDINATOR)
client = Client()
client.force_login(user)
for name, url in (("page", "/studies/bench/results/"), ("api", "/api/studies/bench/results/")):
    times = []
    for _ in range(5):
        start = time.perf_counter()
        response = client.get(url, HTTP_HOST="127.0.0.1")
        times.append(time.perf_counter() - start)
        assert response.status_code == 200, (url, response.status_code)
    print(f"{name} {min(times):.3f} {max(times):.3f}")
"""


def run(command: list[str], env: dict, **kwargs) -> tuple[float, float]:
    """Run a command; return (wall seconds, peak RSS in MB of that child alone)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, cwd=ROOT, **kwargs)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(command)}")
    return elapsed, usage.ru_maxrss / 1024


def ensure_study(args: argparse.Namespace, env: dict) -> None:
    database = args.database_url.rsplit("/", 1)[1]
    server = args.database_url.rsplit("/", 1)[0]
    exists = subprocess.run(
        ["psql", f"{server}/postgres", "-tAc", f"SELECT 1 FROM pg_database WHERE datname = '{database}'"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if args.keep and exists:
        return
    subprocess.run(["psql", f"{server}/postgres", "-qc", f'DROP DATABASE IF EXISTS "{database}"'], check=True)
    subprocess.run(["psql", f"{server}/postgres", "-qc", f'CREATE DATABASE "{database}"'], check=True)
    run([PYTHON, "manage.py", "migrate", "-v0"], env)
    command = [PYTHON, "bench/generate_study.py", "--pairs", str(args.pairs), "--with-ratings", "--slug", "bench"]
    seconds, _ = run(command, env)
    print(f"generated {args.pairs} pairs rated to consensus in {seconds:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/readingroom_release_bench")
    parser.add_argument("--keep", action="store_true", help="reuse the database if the study is there")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="readingroom-results-bench-"))
    env = {
        **os.environ,
        "DATABASE_URL": args.database_url,
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "0",
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "READINGROOM_RESULTS_DIR": str(work / "results"),
    }
    try:
        ensure_study(args, env)
        counts = subprocess.run(
            [
                "psql",
                args.database_url,
                "-tAc",
                "SELECT (SELECT count(*) FROM annotation_annotation), (SELECT count(*) FROM consensus_consensuslabel)",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        print(f"annotations | consensus labels: {counts}")
        load_before = os.getloadavg()

        compute = run([PYTHON, "manage.py", "compute_results", "--study", "bench"], env)
        # DEBUG=1 only so that the page's static files need no collectstatic manifest.
        answered = subprocess.run(
            [PYTHON, "-c", REQUESTS], env={**env, "DEBUG": "1"}, cwd=ROOT, capture_output=True, text=True
        )
        if answered.returncode:
            sys.exit(f"the page or the API failed:\n{answered.stderr}")
        requests = answered.stdout.split("\n")
        (work / "LICENSE.txt").write_text("Benchmark licence.\n", encoding="utf-8")
        export = run(
            [
                PYTHON,
                "manage.py",
                "export_release",
                "--study",
                "bench",
                "--out",
                str(work / "release"),
                "--license",
                str(work / "LICENSE.txt"),
                "--no-progress",
                # A version names one content for ever: with --keep the study may have built 1.0.0 already.
                "--version",
                f"1.0.{time.time_ns()}",
            ],
            env,
            stdout=subprocess.DEVNULL,
        )
        analyze = run(
            [PYTHON, "manage.py", "analyze_release", str(work / "release"), "--out", str(work / "analysed")],
            env,
            stdout=subprocess.DEVNULL,
        )
        document = json.loads((work / "analysed" / "results.json").read_text(encoding="utf-8"))
        # Left out (and said so) when more pairs than it scores without asking are not in its metric cache.
        metrics_in = "included" if "metric_sensitivity" in document else "left out: pairs not scored (--score-metrics)"
        load_after = os.getloadavg()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(f"{'':<34}{'wall s':>10}{'peak MB':>10}")
    print(f"{'compute_results (the worker)':<34}{compute[0]:>10.1f}{compute[1]:>10.0f}")
    print(f"{'export_release':<34}{export[0]:>10.1f}{export[1]:>10.0f}")
    print(f"{'analyze_release on that release':<34}{analyze[0]:>10.1f}{analyze[1]:>10.0f}", end="")
    print(f"   metric sensitivity {metrics_in}")
    for line in filter(None, requests):
        name, fastest, slowest = line.split()
        label = "GET Results page" if name == "page" else "GET results API"
        print(f"{label + ' (min / max of 5)':<34}{float(fastest):>10.3f}{float(slowest):>10.3f} s")
    print(
        f"compute_results / analyze_release: {compute[0] / analyze[0]:.2f}x wall, {compute[1] / analyze[1]:.2f}x memory"
    )
    print(f"compute_results / (export_release + analyze_release): {compute[0] / (export[0] + analyze[0]):.2f}x wall")
    print("targets: compute_results and analyze_release < 30 s and < 1024 MB each")
    print(f"load average (1, 5, 15 min) before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}")
    print(f"load average (1, 5, 15 min) after:  {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")


if __name__ == "__main__":
    main()
