"""Queue building benchmark: wall time and peak memory of assign_readers at two study sizes.

    .venv/bin/python bench/assign.py [--sizes 25000 100000] [--readers 20]
        [--database-url postgres://postgres@127.0.0.1:5432/readingroom_assign_bench] [--keep]

Generates one unassigned study per size (bench/generate_study.py --no-assign: accepted pairs,
sample, readers) into a template database, VACUUM ANALYZEs it, then copies the template to a
fresh working database and, for each size in turn, runs assign_readers in a process of its own
(this script's --worker mode) so that only its own memory counts. Prints wall time, the
worker's own CPU time (PostgreSQL's is not in it), peak resident memory, rows written and the
load average per size, side by side with the ratio of the largest size to the smallest: the
target is under 60 s and under 200 MB at 100,000 pairs, with memory flat in study size.
--keep reuses the template if it already holds the studies.
"""

import argparse
import json
import os
import resource
import secrets
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def slug_for(pairs: int) -> str:
    return f"assign-{pairs}"


def psql(server: str, sql: str) -> str:
    command = ["psql", f"{server}/postgres", "-tAqc", sql]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def worker(slug: str) -> None:
    """Run assign_readers on one study; print its figures as JSON (this process does the work)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from generate_study import setup_django

    setup_django(None)
    from django.contrib.auth import get_user_model

    from annotation.models import Assignment, AuditAction, AuditEvent, Example, Study
    from consensus.assignment import assign_readers

    study = Study.objects.get(slug=slug)
    coordinator = get_user_model().objects.get(username=f"{slug}-coordinator")
    examples = Example.objects.filter(study=study).count()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu_before = usage.ru_utime + usage.ru_stime
    started = time.perf_counter()
    report = assign_readers(study, actor=coordinator)
    seconds = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    figures = {
        "seconds": seconds,
        "cpu_seconds": usage.ru_utime + usage.ru_stime - cpu_before,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "examples": examples,
        "assigned": report.assigned,
        "unfilled": report.unfilled,
        "assignment_rows": Assignment.objects.filter(study=study).count(),
        "audit_rows": AuditEvent.objects.filter(study=study, action=AuditAction.ASSIGNED).count(),
    }
    print(json.dumps(figures))


def run_worker(slug: str, env: dict) -> dict:
    """The worker's figures, with its wall time and peak RSS as the parent sees them (wait4)."""
    load_before = os.getloadavg()
    started = time.perf_counter()
    process = subprocess.Popen(
        [PYTHON, __file__, "--worker", slug], env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"the worker failed on study {slug}")
    figures = json.loads(output.strip().splitlines()[-1])
    figures["process_seconds"] = time.perf_counter() - started
    figures["process_peak_mb"] = usage.ru_maxrss / 1024
    figures["load_before"] = load_before
    figures["load_after"] = os.getloadavg()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[25_000, 100_000], help="pairs per study")
    parser.add_argument("--readers", type=int, default=20)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/readingroom_assign_bench")
    parser.add_argument("--keep", action="store_true", help="reuse the template database if it holds the studies")
    parser.add_argument("--worker", metavar="SLUG", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker)
        return

    server, database = args.database_url.rsplit("/", 1)
    template = f"{database}_template"
    env = {
        **os.environ,
        "DATABASE_URL": f"{server}/{template}",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DEBUG": "0",
        "PYTHONPATH": str(ROOT),
    }
    sizes = sorted(args.sizes)
    slugs = [slug_for(pairs) for pairs in sizes]
    have = set()
    if args.keep and psql(server, f"SELECT 1 FROM pg_database WHERE datname = '{template}'").strip():
        have = set(
            subprocess.run(
                ["psql", f"{server}/{template}", "-tAqc", "SELECT slug FROM annotation_study"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
        )
    if not set(slugs) <= have:
        psql(server, f'DROP DATABASE IF EXISTS "{template}"')
        psql(server, f'CREATE DATABASE "{template}"')
        subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], env=env, cwd=ROOT, check=True)
        for pairs, slug in zip(sizes, slugs, strict=True):
            command = [PYTHON, "bench/generate_study.py", "--pairs", str(pairs), "--readers", str(args.readers)]
            subprocess.run([*command, "--no-assign", "--slug", slug], env=env, cwd=ROOT, check=True)
    # A fresh copy for every run: the template's studies stay unassigned.
    psql(server, f'DROP DATABASE IF EXISTS "{database}"')
    psql(server, f'CREATE DATABASE "{database}" TEMPLATE "{template}"')
    subprocess.run(["psql", args.database_url, "-qc", "VACUUM ANALYZE"], check=True)
    env["DATABASE_URL"] = args.database_url

    results = []
    for pairs, slug in zip(sizes, slugs, strict=True):
        print(f"assign_readers on {slug} ...", flush=True)
        results.append((pairs, run_worker(slug, env)))

    print()
    header = f"{'pairs':>8}{'examples':>10}{'reads':>9}{'wall s':>9}{'CPU s':>8}{'peak MB':>9}{'rows written':>14}"
    print(f"{header}  load average (1, 5, 15 min) before -> after")
    for pairs, r in results:
        rows = r["assignment_rows"] + r["audit_rows"]
        load = " ".join(f"{x:.2f}" for x in r["load_before"]) + " -> " + " ".join(f"{x:.2f}" for x in r["load_after"])
        print(
            f"{pairs:>8}{r['examples']:>10}{r['assigned']:>9}{r['seconds']:>9.1f}{r['cpu_seconds']:>8.1f}"
            f"{r['process_peak_mb']:>9.0f}"
            f"{rows:>14}  {load}"
        )
        if r["unfilled"]:
            print(f"{'':>8}  {r['unfilled']} reads unfilled")
    (small, first), (large, last) = results[0], results[-1]
    if large != small:
        time_ratio = last["seconds"] / first["seconds"]
        memory_ratio = last["process_peak_mb"] / first["process_peak_mb"]
        print(
            f"{large} / {small} pairs ({large / small:.1f}x the study): "
            f"time {time_ratio:.2f}x, peak memory {memory_ratio:.2f}x"
        )
    print("target at 100,000 pairs: under 60 s and under 200 MB, memory flat in study size")


if __name__ == "__main__":
    main()
