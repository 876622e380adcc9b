"""Original reports benchmark: import_reports of a generated MIMIC-CXR-sized zip, then a re-run.

    .venv/bin/python bench/import_reports.py [--reports 227835]
        [--database-url postgres://postgres@127.0.0.1:5432/readingroom_import_bench] [--keep]

Generates a zip in MIMIC-CXR's layout (files/pNN/pNNNNNNNN/sNNNNNNNN.txt; made-up reports of
the usual shape, about 1.1 kB each, some with HISTORY instead of INDICATION, some with neither
Findings nor Impression) in bench/out/, re-creates the database and migrates it, then runs, each
in a process of its own:

- the floor: a bare Python process that reads and decodes every report of the zip (what any
  import must do at least);
- `manage.py import_reports --dataset mimic-cxr ZIP` into the empty database;
- the same again, which finds every report stored unchanged.

Prints wall time, CPU time and peak resident memory of each process (wait4), the reports stored,
the load average before and after each, and the ratios of the import to the floor and of the
re-run to the import. Target: the import under 2 minutes and 500 MB, the re-run faster still.
--keep reuses a generated zip of the same size. A SQLite URL (sqlite:////tmp/bench.sqlite3) works too.
"""

import argparse
import os
import random
import secrets
import subprocess
import sys
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
OUT = ROOT / "bench" / "out"

INDICATIONS = [
    "___ year old man with shortness of breath, evaluate for pneumonia.",
    "___F with cough and fever.  Evaluate for infiltrate.",
    "History: ___M with chest pain, rule out acute process.",
    "Status post line placement, assess position.",
    "Fall, evaluate for rib fracture.",
]
FINDINGS = [
    "The lungs are clear without focal consolidation, pleural effusion, or pneumothorax.",
    "The cardiomediastinal silhouette is within normal limits.",
    "Mild pulmonary vascular congestion is noted without frank edema.",
    "There is a small left pleural effusion with adjacent atelectasis.",
    "A right internal jugular catheter terminates in the mid SVC.",
    "Degenerative changes are seen in the thoracic spine.",
    "Patchy opacity at the right lung base could reflect atelectasis or pneumonia in the correct clinical setting.",
    "Heart size is mildly enlarged, unchanged from the prior study.",
    "No acute osseous abnormality is detected.",
]
IMPRESSIONS = [
    "No acute cardiopulmonary process.",
    "Small left pleural effusion.  Otherwise no acute process.",
    "Right basilar opacity, which could reflect atelectasis, though infection is not excluded.",
    "Mild pulmonary edema.",
    "Lines and tubes in standard position.  No pneumothorax.",
]


def wrap(text: str, width: int = 76) -> str:
    """MIMIC-CXR's layout: lines of at most ~76 characters, each starting with a space."""
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return "\n".join(f" {line}" for line in lines)


def make_report(rng: random.Random) -> str:
    parts = ["                                 FINAL REPORT", " EXAMINATION:  CHEST (PA AND LAT)", " "]
    header = "HISTORY" if rng.random() < 0.2 else "INDICATION"
    parts += [f" {header}:  {rng.choice(INDICATIONS)}", " "]
    if rng.random() < 0.5:
        parts += [" TECHNIQUE:  Chest PA and lateral", " "]
    parts += [f" COMPARISON:  {rng.choice(['___', 'None.', 'Chest radiograph from ___.'])}", " "]
    shape = rng.random()
    sentences = " ".join(rng.choice(FINDINGS) for _ in range(rng.randint(5, 20)))
    if shape < 0.04:  # neither Findings nor Impression: skipped
        parts.append(wrap(sentences))
    else:
        if shape < 0.85:
            parts += [" FINDINGS: ", " ", wrap(sentences), " "]
        parts += [" IMPRESSION: ", " ", wrap(" ".join(rng.choice(IMPRESSIONS) for _ in range(rng.randint(1, 3))))]
    return "\n".join(parts) + "\n"


def generate(path: Path, reports: int) -> None:
    rng = random.Random(20261201)
    tmp = path.with_suffix(".partial")
    patient, study = 10_000_000, 50_000_000
    written = 0
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        while written < reports:
            patient += rng.randint(1, 50)
            for _ in range(min(rng.randint(1, 7), reports - written)):
                study += rng.randint(1, 30)
                name = f"files/p{str(patient)[:2]}/p{patient}/s{study}.txt"
                archive.writestr(name, make_report(rng))
                written += 1
    tmp.rename(path)


def floor(path: str) -> None:
    """Read and decode every report of the zip: the least an import does."""
    total = 0
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if info.filename.endswith(".txt"):
                total += len(archive.read(info).decode("utf-8"))
    print(f"{total} characters")


def measure(command: list[str], env: dict) -> dict:
    load_before = os.getloadavg()
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(command)}\n{output}")
    return {
        "seconds": seconds,
        "cpu": usage.ru_utime + usage.ru_stime,
        "peak_mb": usage.ru_maxrss / 1024,
        "output": output.strip(),
        "load_before": load_before,
        "load_after": os.getloadavg(),
    }


def reset_database(url: str, env: dict) -> None:
    if url.startswith("sqlite:"):
        Path(url.removeprefix("sqlite:///")).unlink(missing_ok=True)
    else:
        server, database = url.rsplit("/", 1)
        for sql in (f'DROP DATABASE IF EXISTS "{database}"', f'CREATE DATABASE "{database}"'):
            subprocess.run(["psql", f"{server}/postgres", "-qc", sql], check=True, capture_output=True)
    subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], env=env, cwd=ROOT, check=True)


def count_rows(env: dict) -> int:
    code = "from annotation.models import OriginalReport; print(OriginalReport.objects.count())"
    result = subprocess.run(
        [PYTHON, "manage.py", "shell", "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    return int(result.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reports", type=int, default=227_835)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/readingroom_import_bench")
    parser.add_argument("--keep", action="store_true", help="reuse the generated zip if it exists")
    parser.add_argument("--floor", metavar="ZIP", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.floor:
        floor(args.floor)
        return

    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"mimic-cxr-reports-{args.reports}.zip"
    if not (args.keep and path.exists()):
        print(f"generating {path.name} ...", flush=True)
        started = time.perf_counter()
        generate(path, args.reports)
        print(f"  {time.perf_counter() - started:.0f} s, {path.stat().st_size / 2**20:.0f} MB", flush=True)
    env = {
        **os.environ,
        "DATABASE_URL": args.database_url,
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DEBUG": "0",
        "PYTHONPATH": str(ROOT),
    }
    reset_database(args.database_url, env)

    import_command = [PYTHON, "manage.py", "import_reports", "--dataset", "mimic-cxr", str(path), "--no-progress"]
    runs = []
    print("floor: read and decode every report ...", flush=True)
    runs.append(("floor (read + decode)", measure([PYTHON, __file__, "--floor", str(path)], env)))
    print("import_reports into an empty database ...", flush=True)
    runs.append(("import_reports", measure(import_command, env)))
    stored = count_rows(env)
    print("import_reports again (nothing changes) ...", flush=True)
    runs.append(("import_reports again", measure(import_command, env)))
    if count_rows(env) != stored:
        sys.exit("the re-run changed the number of stored reports")

    print()
    print(f"{args.reports:,} reports in {path.name} ({path.stat().st_size / 2**20:.0f} MB), {stored:,} stored")
    print(f"database: {args.database_url.split('@')[-1]}")
    print(f"{'':<24}{'wall s':>8}{'CPU s':>8}{'peak MB':>9}  load average (1, 5, 15 min) before -> after")
    for name, run in runs:
        before, after = (" ".join(f"{x:.2f}" for x in run[key]) for key in ("load_before", "load_after"))
        load = f"{before} -> {after}"
        print(f"{name:<24}{run['seconds']:>8.1f}{run['cpu']:>8.1f}{run['peak_mb']:>9.0f}  {load}")
    for line in runs[1][1]["output"].splitlines()[:3]:
        print(f"  {line[:150]}")
    floor_run, first, again = (run for _, run in runs)
    print(
        f"import / floor: {first['seconds'] / floor_run['seconds']:.2f}x wall, "
        f"{first['cpu'] / floor_run['cpu']:.2f}x CPU; "
        f"re-run / import: {again['seconds'] / first['seconds']:.2f}x wall"
    )
    print("target: import under 120 s and 500 MB; the re-run faster still")


if __name__ == "__main__":
    main()
