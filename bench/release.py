"""Release build benchmark: time and peak memory of export_release next to PostgreSQL's own COPY.

    .venv/bin/python bench/release.py [--pairs 100000] [--database-url postgres://postgres@127.0.0.1:5432/readingroom_release_bench]
        [--keep]   # reuse the database if it already holds the generated study

Builds a fresh database, generates a study of N pairs rated to consensus (bench/generate_study.py),
then, in separate processes so that only their own memory counts:
- `manage.py export_release` (the application's build: six CSVs, README, LICENSE, SHA256SUMS);
- `psql -c "COPY (...) TO STDOUT WITH CSV"` of the same rows (the two full files' joined rows and the
  two consensus files'), written to a file: the floor for reading those rows out of PostgreSQL.
Prints wall time and peak resident memory of each, and their ratio. Target: build within 3x of
COPY, peak memory under 400 MB whatever the study size.

With --storage: the worker's whole build instead (the folder, the zip, then the zip stored in the
releases storage and read back for its SHA-256), once to the local folder (READINGROOM_STORAGE=local)
and once to an S3-compatible server (moto's server mode on loopback, READINGROOM_STORAGE=s3), in
turns, --rounds times each, in separate processes. Target: the object store at most 1.2x the local
folder's time (the medians), and peak memory flat (the zip never held in memory).
"""

import argparse
import json
import os
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable

COPY_QUERIES = {
    "task1_full": """
        SELECT d.key, p.source_study_id, v.key, e.report_type, a.rating, a.rationale,
               p.indication, p.comparison, p.technique,
               CASE WHEN e.report_type = 'original' THEN p.original_findings ELSE p.alternative_findings END,
               CASE WHEN e.report_type = 'original' THEN p.original_impression ELSE p.alternative_impression END
        FROM annotation_annotation a
        JOIN annotation_example e ON e.id = a.example_id
        JOIN annotation_candidatepair p ON p.id = e.pair_id
        JOIN annotation_dataset d ON d.id = p.dataset_id
        JOIN annotation_variation v ON v.id = p.variation_id
        JOIN consensus_consensuslabel c ON c.example_id = e.id
        WHERE e.task = 'realism' AND a.voided_at IS NULL
        ORDER BY d.key COLLATE "C", p.source_study_id COLLATE "C", v.key COLLATE "C", e.report_type, e.id""",
    "task2_full": """
        SELECT d.key, p.source_study_id, v.key, a.report_a_type, a.rating, a.rationale,
               p.indication, p.comparison, p.technique,
               p.original_findings, p.original_impression, p.alternative_findings, p.alternative_impression
        FROM annotation_annotation a
        JOIN annotation_example e ON e.id = a.example_id
        JOIN annotation_candidatepair p ON p.id = e.pair_id
        JOIN annotation_dataset d ON d.id = p.dataset_id
        JOIN annotation_variation v ON v.id = p.variation_id
        JOIN consensus_consensuslabel c ON c.example_id = e.id
        WHERE e.task = 'equivalence' AND a.voided_at IS NULL
        ORDER BY d.key COLLATE "C", p.source_study_id COLLATE "C", v.key COLLATE "C", e.id""",
    "consensus": """
        SELECT d.key, p.source_study_id, v.key, e.report_type, c.rating, c.label_source, c.n_annotations
        FROM consensus_consensuslabel c
        JOIN annotation_example e ON e.id = c.example_id
        JOIN annotation_candidatepair p ON p.id = e.pair_id
        JOIN annotation_dataset d ON d.id = p.dataset_id
        JOIN annotation_variation v ON v.id = p.variation_id
        ORDER BY e.task, d.key COLLATE "C", p.source_study_id COLLATE "C", v.key COLLATE "C", e.report_type""",
}


def run(command: list[str], env: dict, **kwargs) -> tuple[float, float]:
    """Run a command; return (wall seconds, peak RSS in MB of that child alone)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, cwd=ROOT, **kwargs)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(command)}")
    return elapsed, usage.ru_maxrss / 1024


# The worker's build of one release in this process (manage.py shell): its wall time, status and SHA-256.
STORED_BUILD = """
import json, time
from django.contrib.auth import get_user_model
from annotation.models import Study
from exports.models import Release, ReleaseStatus
from exports.tasks import run_release_build
study = Study.objects.get(slug="bench")
user, _ = get_user_model().objects.get_or_create(username="release-bench")
release = Release.objects.create(study=study, requested_by=user, version="0.%d" % time.time_ns(),
                                 license_text="Benchmark licence.\\n", status=ReleaseStatus.QUEUED)
started = time.perf_counter()
run_release_build(str(release.public_id))
seconds = time.perf_counter() - started
release.refresh_from_db()
print(json.dumps({"seconds": seconds, "status": release.status, "error": release.error, "sha256": release.sha256}))
"""


def stored_builds(env: dict, rounds: int) -> None:
    """The worker's build to the local folder and to an S3-compatible server, in turns."""
    sys.path.insert(0, str(ROOT))
    from tests.s3 import running_s3_server

    results: dict[str, list[tuple[float, float]]] = {"local folder": [], "object store (S3)": []}
    with running_s3_server() as s3, tempfile.TemporaryDirectory(prefix="readingroom-release-bench-") as work:
        bucket = s3.new_bucket()
        storages = {
            "local folder": {"READINGROOM_STORAGE": "local"},
            "object store (S3)": s3.settings(bucket),
        }
        print(f"load average before: {', '.join(f'{load:.2f}' for load in os.getloadavg())}")
        for round_ in range(rounds):
            for name, settings in storages.items():
                folder = Path(work) / f"{round_}-{name.split()[0]}"
                run_env = {**env, **settings, "READINGROOM_RELEASES_DIR": str(folder)}
                output = Path(work) / "out.json"
                with output.open("w") as out:
                    _, peak_mb = run([PYTHON, "manage.py", "shell", "-c", STORED_BUILD], run_env, stdout=out)
                report = json.loads(output.read_text().strip().splitlines()[-1])
                if report["status"] != "done":
                    sys.exit(f"{name}: the build ended {report['status']}: {report['error']}")
                results[name].append((report["seconds"], peak_mb))
                print(f"round {round_ + 1}, {name}: {report['seconds']:.1f} s, peak {peak_mb:.0f} MB")
                shutil.rmtree(folder, ignore_errors=True)
        stored = s3.client().list_objects_v2(Bucket=bucket).get("Contents", [])
        zip_mb = max(item["Size"] for item in stored) / 1e6 if stored else 0.0
    print()
    print(f"{'':<22}{'median s':>10}{'peak MB':>10}")
    for name, runs in results.items():
        print(f"{name:<22}{statistics.median(r[0] for r in runs):>10.1f}{max(r[1] for r in runs):>10.0f}")
    ratio = statistics.median(r[0] for r in results["object store (S3)"]) / statistics.median(
        r[0] for r in results["local folder"]
    )
    print(f"zip: {zip_mb:.1f} MB; object store / local folder: {ratio:.2f}x (target <= 1.2x)")
    print(f"load average after: {', '.join(f'{load:.2f}' for load in os.getloadavg())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--readers", type=int, default=20)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/readingroom_release_bench")
    parser.add_argument("--keep", action="store_true", help="reuse the database if the study is there")
    parser.add_argument("--storage", action="store_true", help="the worker's build to a local folder and to S3")
    parser.add_argument("--rounds", type=int, default=3, help="with --storage: builds of each kind")
    args = parser.parse_args()
    database = args.database_url.rsplit("/", 1)[1]
    server = args.database_url.rsplit("/", 1)[0]
    env = {
        **os.environ,
        "DATABASE_URL": args.database_url,
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DEBUG": "0",
        "PYTHONPATH": str(ROOT),
    }

    exists = subprocess.run(
        ["psql", f"{server}/postgres", "-tAc", f"SELECT 1 FROM pg_database WHERE datname = '{database}'"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not (args.keep and exists):
        subprocess.run(["psql", f"{server}/postgres", "-qc", f'DROP DATABASE IF EXISTS "{database}"'], check=True)
        subprocess.run(["psql", f"{server}/postgres", "-qc", f'CREATE DATABASE "{database}"'], check=True)
        run([PYTHON, "manage.py", "migrate", "-v0"], env)
        seconds, _ = run(
            [
                PYTHON,
                "bench/generate_study.py",
                "--pairs",
                str(args.pairs),
                "--readers",
                str(args.readers),
                "--with-ratings",
                "--slug",
                "bench",
            ],
            env,
        )
        print(f"generated {args.pairs} pairs rated to consensus in {seconds:.0f} s")

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
    if args.storage:
        stored_builds(env, args.rounds)
        return

    work = Path(tempfile.mkdtemp(prefix="readingroom-release-bench-"))
    try:
        license_file = work / "LICENSE.txt"
        license_file.write_text("Benchmark licence.\n", encoding="utf-8")
        build_seconds, build_mb = run(
            [
                PYTHON,
                "manage.py",
                "export_release",
                "--study",
                "bench",
                "--out",
                str(work / "release"),
                "--license",
                str(license_file),
                # Each build takes its version for good: a fresh one per run (with --keep).
                "--version",
                f"0.{time.time_ns()}",
                "--no-progress",
            ],
            env,
            stdout=subprocess.DEVNULL,
        )
        copy_seconds = 0.0
        copy_mb = 0.0
        for name, query in COPY_QUERIES.items():
            sql = "COPY (" + " ".join(query.split()) + ") TO STDOUT WITH CSV"
            with (work / f"copy-{name}.csv").open("wb") as out:
                seconds, mb = run(["psql", args.database_url, "-qc", sql], env, stdout=out)
            copy_seconds += seconds
            copy_mb = max(copy_mb, mb)
        release_bytes = sum(p.stat().st_size for p in (work / "release").rglob("*") if p.is_file())
        copy_bytes = sum(p.stat().st_size for p in work.glob("copy-*.csv"))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(f"{'':<22}{'wall s':>10}{'peak MB':>10}{'output MB':>12}")
    print(f"{'export_release':<22}{build_seconds:>10.1f}{build_mb:>10.0f}{release_bytes / 1e6:>12.1f}")
    print(f"{'COPY ... TO STDOUT':<22}{copy_seconds:>10.1f}{copy_mb:>10.0f}{copy_bytes / 1e6:>12.1f}")
    print(f"build / COPY: {build_seconds / copy_seconds:.2f}x (target <= 3x); peak memory target < 400 MB")
    print(f"(this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")
    print("load average (1, 5, 15 min): " + ", ".join(f"{load:.2f}" for load in os.getloadavg()))


if __name__ == "__main__":
    main()
