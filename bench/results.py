"""Results benchmark: `manage.py analyze_release` on the release of a 100,000-pair study.

    .venv/bin/python bench/results.py [--pairs 100000] [--database-url postgres://postgres@127.0.0.1:5432/readingroom_results_bench]
        [--keep]   # reuse the database if it already holds the generated study

Builds a fresh database and a study of N pairs rated to consensus (bench/generate_study.py, as the
release benchmark does), builds its release with `manage.py export_release`, then, each in its own
process so that only its own memory counts:
- `manage.py analyze_release RELEASE --out DIR` (tables, figures, summary, methods, results.md,
  results.json) three ways: with the metric sensitivity from an empty metric cache (cold: every
  pair's BLEU-2, ROUGE-L and chrF scored), with it from the cache the cold run filled (warm), and
  with `--no-metrics`;
- the floor: pandas reading the six release files (dtype=str), with nothing computed.
Each is run --repeat times (default 3); prints the best and the median wall time, CPU time (user +
system, which the other processes on a shared machine do not inflate), peak resident memory,
their ratios and the load average. Target: analyze_release under 30 s and under 1 GB peak.
"""

import argparse
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.release import PYTHON, ROOT, run

FLOOR = """
import sys
import pandas as pd
from analysis.frames import RELEASE_FILES
rows = 0
for name in RELEASE_FILES:
    rows += len(pd.read_csv(sys.argv[1] + "/" + name, dtype=str, keep_default_na=False))
print(rows)
"""


def measure(command: list[str], env: dict, repeat: int) -> dict:
    """Run a command `repeat` times; best and median wall seconds, median CPU seconds, peak MB."""
    walls, cpus, peaks = [], [], []
    for _ in range(repeat):
        start = time.perf_counter()
        process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"failed: {' '.join(command)}")
        walls.append(time.perf_counter() - start)
        cpus.append(usage.ru_utime + usage.ru_stime)
        peaks.append(usage.ru_maxrss / 1024)
    return {"best": min(walls), "median": statistics.median(walls), "cpu": statistics.median(cpus), "mb": max(peaks)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--readers", type=int, default=20)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/readingroom_results_bench")
    parser.add_argument("--keep", action="store_true", help="reuse the database if the study is there")
    parser.add_argument("--repeat", type=int, default=3)
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
        command = [PYTHON, "bench/generate_study.py", "--pairs", str(args.pairs), "--readers", str(args.readers)]
        seconds, _ = run([*command, "--with-ratings", "--slug", "bench"], env)
        print(f"generated {args.pairs} pairs rated to consensus in {seconds:.0f} s")

    work = Path(tempfile.mkdtemp(prefix="readingroom-results-bench-"))
    try:
        license_file = work / "LICENSE.txt"
        license_file.write_text("Benchmark licence.\n", encoding="utf-8")
        release = work / "release"
        # A version names one content for ever: a kept database gets the next one each run.
        version = f"1.0.{int(time.time())}"
        export = ["manage.py", "export_release", "--study", "bench", "--out", str(release), "--no-progress"]
        export += ["--version", version]
        seconds, _ = run(
            [PYTHON, *export, "--license", str(license_file)],
            env,
            stdout=subprocess.DEVNULL,
        )
        release_mb = sum(p.stat().st_size for p in release.rglob("*") if p.is_file()) / 1e6
        print(f"release built in {seconds:.0f} s: {release_mb:.0f} MB")
        load_before = os.getloadavg()
        out = work / "results"
        analyze = [PYTHON, "manage.py", "analyze_release", str(release), "--out", str(out)]
        cache = work / "metric-cache.sqlite3"
        runs = {}
        # Cold once (then the cache holds every score), warm and without metrics --repeat times.
        # --score-metrics: "with metrics" however many of the pairs are new to the cache.
        runs["with metrics, cold cache"] = measure([*analyze, "--metric-cache", str(cache), "--score-metrics"], env, 1)
        runs["with metrics, warm cache"] = measure([*analyze, "--metric-cache", str(cache)], env, args.repeat)
        runs["--no-metrics"] = measure([*analyze, "--no-metrics"], env, args.repeat)
        floor = measure([PYTHON, "-c", FLOOR, str(release)], env, args.repeat)
        load_after = os.getloadavg()
        counts = json.loads((out / "results.json").read_text())["counts"]
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(f"examples with a consensus: {counts}")
    print(f"load average before / after: {load_before[0]:.2f} / {load_after[0]:.2f} ({os.cpu_count()} cores)")
    print(f"{'analyze_release':<42}{'best s':>9}{'median s':>10}{'CPU s':>8}{'peak MB':>9}")
    for name, m in [*runs.items(), ("(pandas reads the six files)", floor)]:
        print(f"  {name:<40}{m['best']:>9.1f}{m['median']:>10.1f}{m['cpu']:>8.1f}{m['mb']:>9.0f}")
    for name, m in runs.items():
        print(
            f"{name} / read: {m['median'] / floor['median']:.2f}x wall, "
            f"{m['cpu'] / floor['cpu']:.2f}x CPU, {m['mb'] / floor['mb']:.2f}x memory"
        )
    print("target: analyze_release < 30 s and < 1024 MB peak")


if __name__ == "__main__":
    main()
