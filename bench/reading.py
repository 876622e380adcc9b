"""Benchmark of the reading API on PostgreSQL behind gunicorn, against a floor on the same stack.

    .venv/bin/python bench/reading.py [--pairs 50000] [--readers 20] [--duration 60]

1. (Re)creates the database (default readingroom_bench on 127.0.0.1; its name must contain
   "bench"), migrates it and generates a study (bench/generate_study.py), then collectstatic, and
   writes the load's dirty pages (CHECKPOINT) so that no checkpoint of the load runs while measuring.
2. Starts gunicorn (config.wsgi, production settings: DEBUG off) on a free port of 127.0.0.1,
   with the settings module bench.settings, which adds one URL: the floor, a bare view doing one
   indexed SELECT. The application itself has no such endpoint.
3. Phase "floor": N clients GET the floor with random assignment ids for --duration seconds.
   Phase "readers": N simulated readers, each with its API token, loop for --duration seconds.
   The two take turns (--rounds of each, 4 by default), so that what else the shared machine does
   meanwhile weighs on both alike; each round's CPU ratio is printed too. A reader:
   GET /api/reading/next/?task=... then POST /api/reading/<id>/rating/ (a valid rating,
   a rationale and the form token). No think time unless --think-ms (a closed loop: each client
   sends its next request at once); with it, each client pauses a random 0.5x-1.5x of it
   between items, floor clients between requests.
4. Prints requests, errors and latency percentiles per operation, and the ratio of their p99 to
   the floor's; the CPU per request of the gunicorn workers and of PostgreSQL (read from /proc,
   exited processes included), the reading requests' server CPU against the floor's, the rows
   read per request and each worker's peak memory; then checks that every successful submit is
   stored as an Annotation with its form token. Results also go to bench/out/reading-<time>.json.

--label-studio-venv PATH then runs the same closed loop against Label Studio 1.23.2 (installed by hand
in its own virtual environment: pip install label-studio==1.23.2 gunicorn), on the same PostgreSQL
(database readingroom_bench_ls, set up by bench/label_studio_setup.py inside Label Studio's own
manage.py: the same pairs, two projects for the two tasks, two annotations per task, the readers'
tokens), under gunicorn with the same workers, with the same clients; and prints both side by side.

--capacity replaces the readers phase: paced readers (--think-ms, 1000 if unset) in rounds of
--duration seconds, --step more each round (from --readers up to --max-readers, the study's
readers), until the p99 of next or submit passes 100 ms; it prints the last count that held.

Talks to 127.0.0.1 only. Gunicorn is stopped at the end, on errors and on Ctrl+C.
"""

import argparse
import http.client
import json
import math
import os
import random
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
OUT = ROOT / "bench" / "out"
LOOPBACK = "127.0.0.1"
SLUG = "bench"
REQUEST_TIMEOUT = 30.0
TARGET_P99_MS = 100.0
# Server CPU per reading request (next or submit) against the floor's, measured in one run.
TARGET_CPU_RATIO = 3.0
CAPACITY_TARGET = 100
# Closed-loop reading throughput against Label Studio's on the same set-up.
TARGET_PEER_RATIO = 20.0
# Realism examples outnumber equivalence examples two to one in every queue.
TASKS = ("realism", "realism", "equivalence")
RATIONALE = "Benchmark rating: the wording differs from routine reports."


# --- Setup --------------------------------------------------------------------------------------


def server_environment(database_url: str) -> dict[str, str]:
    """Production settings on loopback: DEBUG off, no TLS redirects or secure-only cookies."""
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="bench.settings",
        PYTHONPATH=str(ROOT),
        DEBUG="0",
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS=LOOPBACK,
        SECURE_SSL_REDIRECT="0",
        SESSION_COOKIE_SECURE="0",
        CSRF_COOKIE_SECURE="0",
        DATABASE_URL=database_url,
    )
    return env


def check_database_url(database_url: str) -> str:
    """The database name, after refusing anything but a benchmark database on loopback."""
    parts = urlsplit(database_url)
    name = parts.path.lstrip("/")
    if parts.scheme not in ("postgres", "postgresql"):
        sys.exit(f"{database_url}: the benchmark runs on PostgreSQL (postgres://...).")
    if parts.hostname != LOOPBACK:
        sys.exit(f"{database_url}: the benchmark talks to {LOOPBACK} only.")
    if "bench" not in name:
        sys.exit(f"{database_url}: the benchmark drops its database; its name must contain 'bench'.")
    return name


def recreate_database(database_url: str, name: str) -> None:
    import psycopg
    from psycopg import sql

    maintenance = urlsplit(database_url)._replace(path="/postgres").geturl()
    with psycopg.connect(maintenance, autocommit=True) as connection:
        connection.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def checkpoint(database_url: str) -> None:
    """Write the dirty pages of a bulk load now (CHECKPOINT), before anything is measured: otherwise
    the checkpoint that the load's WAL starts writes them, and fsyncs every file it touched, during the
    first rounds, which then measure the load's aftermath rather than the reading loop. Needs a
    superuser or pg_checkpoint's role; where it is refused the benchmark goes on and says so."""
    import psycopg

    started = time.perf_counter()
    try:
        with psycopg.connect(database_url, autocommit=True) as connection:
            connection.execute("CHECKPOINT")
    except psycopg.errors.InsufficientPrivilege as refused:
        print(f"   (no checkpoint: {refused}; a checkpoint may run during the first rounds)", flush=True)
        return
    print(f"\n== checkpoint after the bulk load ({time.perf_counter() - started:.1f} s)", flush=True)


def run(step: str, command: list[str], env: dict[str, str]) -> list[str]:
    """Run a setup command in the project folder, echoing its output; fail loudly."""
    print(f"\n== {step}", flush=True)
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    assert process.stdout is not None
    for line in process.stdout:
        print("   " + line, end="", flush=True)
        lines.append(line.rstrip("\n"))
    if process.wait() != 0:
        sys.exit(f"{step} failed (exit status {process.returncode}).")
    print(f"   ({time.perf_counter() - started:.1f} s)", flush=True)
    return lines


def setup_django(env: dict[str, str]) -> None:
    """Django in this process too, for the tokens, the floor's ids and the final check."""
    os.environ.update({k: env[k] for k in ("DJANGO_SETTINGS_MODULE", "DEBUG", "SECRET_KEY", "DATABASE_URL")})
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django

    django.setup()


# The tables that grow with a study's work; the figure below is what they give per request.
WORK_TABLES = (
    "annotation_assignment",
    "annotation_annotation",
    "annotation_example",
    "annotation_candidatepair",
    "annotation_readerqueue",
    "annotation_auditevent",
    "consensus_adjudication",
    "consensus_consensuslabel",
)


def work_rows_read() -> int:
    """Rows PostgreSQL's scans have returned from the work tables since the server started (all backends)."""
    from django.db import connection

    time.sleep(1.5)  # backends flush their table statistics about once a second
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)), 0) FROM pg_stat_user_tables "
            "WHERE relname = ANY(%s)",
            [list(WORK_TABLES)],
        )
        return int(cursor.fetchone()[0])


def reader_tokens(slug: str) -> list[str]:
    """A new reading token for each reader of the study (keys are kept only as digests, so the
    run makes its own, replacing an earlier run's)."""
    from django.contrib.auth import get_user_model

    from annotation.models import ApiToken, TokenScope
    from annotation.tokens import issue_token, revoke_token

    readers = (
        get_user_model()
        .objects.filter(study_memberships__study__slug=slug, study_memberships__role="reader")
        .order_by("pk")
    )
    for earlier in ApiToken.objects.filter(user__in=readers, name="Benchmark"):
        revoke_token(earlier, actor=None)
    return [issue_token(reader, name="Benchmark", scope=TokenScope.READING)[1] for reader in readers]


def floor_ids(slug: str, count: int) -> list[str]:
    from annotation.models import Assignment

    pks = list(Assignment.objects.filter(example__study__slug=slug).values_list("pk", flat=True))
    chosen = random.Random(7).sample(pks, min(count, len(pks)))
    return [
        str(public_id) for public_id in Assignment.objects.filter(pk__in=chosen).values_list("public_id", flat=True)
    ]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def start_gunicorn(env: dict[str, str], port: int, workers: int, log_path: Path) -> subprocess.Popen:
    command = [
        str(Path(PYTHON).with_name("gunicorn")),
        "config.wsgi:application",
        "--bind",
        f"{LOOPBACK}:{port}",
        "--workers",
        str(workers),
        "--worker-class",
        "sync",
        "--timeout",
        "60",
        "--log-level",
        "warning",
    ]
    log = open(log_path, "w")  # noqa: SIM115 - kept open for the server's lifetime
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def stop_gunicorn(server: subprocess.Popen) -> None:
    if server.poll() is not None:
        return
    server.send_signal(signal.SIGTERM)  # graceful: the master stops its workers
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def wait_until_serving(port: int, path: str, server: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(f"gunicorn exited (status {server.returncode}); see its log in bench/out/.")
        try:
            status, _ = request(port, "GET", path)
        except OSError:
            time.sleep(0.2)
            continue
        if status == 200:
            return
        sys.exit(f"gunicorn answers {status} on {path}; see its log in bench/out/.")
    sys.exit(f"gunicorn did not answer within {timeout:.0f} s.")


# --- Load ---------------------------------------------------------------------------------------


def request(port: int, method: str, path: str, *, token: str = "", body: dict | None = None) -> tuple[int, bytes]:
    """One request on a new connection (gunicorn's sync workers close every connection)."""
    connection = http.client.HTTPConnection(LOOPBACK, port, timeout=REQUEST_TIMEOUT)
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Token {token}"
    payload = None
    if body is not None:
        payload = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    try:
        connection.request(method, path, body=payload, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@dataclass
class Recorder:
    """Latencies and errors per operation, shared by the client threads of one phase."""

    max_requests: int
    deadline: float
    stop: threading.Event
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    attempts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    error_samples: list[str] = field(default_factory=list)
    other: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    submitted: list[tuple[str, str]] = field(default_factory=list)
    sent: int = 0
    load_before: str = ""
    load_after: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def may_send(self) -> bool:
        with self.lock:
            if self.stop.is_set() or time.monotonic() >= self.deadline or self.sent >= self.max_requests:
                return False
            self.sent += 1
            return True

    def timed(self, operation: str, port: int, method: str, path: str, ok: tuple[int, ...], **kwargs):
        """(status, body) of the request, its latency recorded; None (an error recorded) on failure."""
        with self.lock:
            self.attempts[operation] += 1
        started = time.perf_counter()
        try:
            status, body = request(port, method, path, **kwargs)
        except (OSError, http.client.HTTPException) as failure:
            self.error(operation, f"{method} {path}: {failure!r}")
            return None
        elapsed_ms = (time.perf_counter() - started) * 1000
        with self.lock:
            self.latencies[operation].append(elapsed_ms)
        if status not in ok:
            self.error(operation, f"{method} {path}: HTTP {status} {body[:200]!r}")
            return None
        return status, body

    def error(self, operation: str, message: str) -> None:
        with self.lock:
            self.errors[operation] += 1
            if len(self.error_samples) < 20:
                self.error_samples.append(message)


def pause(recorder: Recorder, rng: random.Random, think: float) -> None:
    """A reader's time on an item: think seconds on average, drawn anew each time (0.5x to 1.5x).

    Independent readers do not move in step: a fixed pause would keep all clients in lockstep
    and turn a calm load into bursts of 20 simultaneous requests.
    """
    if think > 0:
        recorder.stop.wait(rng.uniform(0.5 * think, 1.5 * think))


def floor_client(recorder: Recorder, port: int, ids: list[str], seed: int, think: float) -> None:
    rng = random.Random(seed)
    pause(recorder, rng, think)
    while recorder.may_send():
        recorder.timed("floor", port, "GET", f"/bench/floor/{rng.choice(ids)}/", (200,))
        pause(recorder, rng, think)


def fetch_next(recorder: Recorder, port: int, path: str, task: str, token: str, done: int) -> dict | None:
    """The next item of a queue (timed as "next"), or None: on an error, or when the queue answers `done`."""
    answer = recorder.timed("next", port, "GET", path, (200, done), token=token)
    if answer is None:
        return None
    status, body = answer
    if status == done:
        with recorder.lock:
            recorder.other[f"next: {task} queue done"] += 1
        return None
    return json.loads(body)


def reader_client(recorder: Recorder, port: int, token: str, seed: int, think: float) -> None:
    rng = random.Random(seed)
    while recorder.may_send():
        pause(recorder, rng, think)
        task = rng.choice(TASKS)
        item = fetch_next(recorder, port, f"/api/reading/next/?task={task}", task, token, done=204)
        if item is None:
            continue
        labels = [label["value"] for label in item["labels"]]
        rating = rng.choices(labels, weights=(0.7, 0.2, 0.1))[0]
        form = {"rating": rating, "rationale": RATIONALE, "form_token": item["form_token"]}
        if not recorder.may_send():
            break
        answer = recorder.timed(
            "submit", port, "POST", f"/api/reading/{item['id']}/rating/", (200, 201), token=token, body=form
        )
        if answer is not None:
            with recorder.lock:
                recorder.submitted.append((item["id"], item["form_token"]))


# Label Studio's labels for the same two tasks (bench/label_studio_setup.py makes the projects).
LABEL_STUDIO_LABELS = {
    "realism": ("Realistic", "Minor Issues", "Major Issues"),
    "equivalence": ("Equivalent", "Minor Discrepancy", "Major Discrepancy"),
}
LABEL_STUDIO_TEXT = {"realism": "report", "equivalence": "report_a"}


def label_studio_client(recorder: Recorder, port: int, token: str, seed: int, think: float, projects: dict) -> None:
    """A reader of Label Studio doing what reader_client does: its labeling stream's next task of a
    project, then an annotation of it (a rating and a rationale), through its API with a token."""
    rng = random.Random(seed)
    while recorder.may_send():
        pause(recorder, rng, think)
        task = rng.choice(TASKS)
        project = projects[task]
        item = fetch_next(recorder, port, f"/api/projects/{project}/next", task, token, done=404)
        if item is None:
            continue
        rating = rng.choices(LABEL_STUDIO_LABELS[task], weights=(0.7, 0.2, 0.1))[0]
        target = LABEL_STUDIO_TEXT[task]
        result = [
            {"from_name": "rating", "to_name": target, "type": "choices", "value": {"choices": [rating]}},
            {"from_name": "rationale", "to_name": target, "type": "textarea", "value": {"text": [RATIONALE]}},
        ]
        if not recorder.may_send():
            break
        path = f"/api/tasks/{item['id']}/annotations/?project={project}"
        body = {"result": result, "lead_time": 1.0, "project": project}
        recorder.timed("submit", port, "POST", path, (200, 201), token=token, body=body)


# --- Label Studio on the same machine, for the side-by-side comparison ---------------------------


def label_studio_package(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages/label_studio"))
    if not found or not (venv / "bin" / "gunicorn").exists():
        sys.exit(f"No label_studio package and gunicorn in {venv}: pip install label-studio==1.23.2 gunicorn there.")
    return found[0]


def label_studio_environment(database_url: str) -> dict[str, str]:
    parts = urlsplit(database_url)
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="core.settings.label_studio",
        DJANGO_DB="default",
        POSTGRE_NAME=parts.path.lstrip("/"),
        POSTGRE_HOST=parts.hostname or LOOPBACK,
        POSTGRE_PORT=str(parts.port or 5432),
        POSTGRE_USER=parts.username or "postgres",
        POSTGRE_PASSWORD=parts.password or "",
        LABEL_STUDIO_BASE_DATA_DIR=str(OUT / "label-studio-data"),
        DEBUG="false",
    )
    return env


def set_up_label_studio(venv: Path, database_url: str, pairs: int, readers: int) -> dict:
    """A new database, Label Studio's migrations, then its projects, readers and tasks (bench/label_studio_setup.py,
    run by Label Studio's own manage.py). Returns {"projects": {task: id}, "tokens": [...]}."""
    name = check_database_url(database_url)
    package = label_studio_package(venv)
    env = label_studio_environment(database_url)
    print(f"== Label Studio database {name}: dropped and created again", flush=True)
    recreate_database(database_url, name)
    python = str(venv / "bin" / "python")
    run("Label Studio: migrate", [python, str(package / "manage.py"), "migrate", "-v", "0"], env)
    out = OUT / "label-studio-setup.json"
    env.update(BENCH_PAIRS=str(pairs), BENCH_READERS=str(readers), BENCH_OUT=str(out))
    script = f"exec(open({str(ROOT / 'bench' / 'label_studio_setup.py')!r}).read())"
    run("Label Studio: projects, readers, tasks", [python, str(package / "manage.py"), "shell", "-c", script], env)
    checkpoint(database_url)
    return json.loads(out.read_text())


def start_label_studio(venv: Path, database_url: str, port: int, workers: int, log_path: Path) -> subprocess.Popen:
    """Label Studio's WSGI application under gunicorn, with the same server settings as ReadingRoom's."""
    command = [str(venv / "bin" / "gunicorn"), "core.wsgi:application", "--bind", f"{LOOPBACK}:{port}"]
    command += ["--workers", str(workers), "--worker-class", "sync", "--timeout", "60", "--log-level", "warning"]
    log = open(log_path, "w")  # noqa: SIM115 - kept open for the server's lifetime
    env = label_studio_environment(database_url)
    return subprocess.Popen(command, cwd=label_studio_package(venv), env=env, stdout=log, stderr=subprocess.STDOUT)


def compare_with_label_studio(args, readers_row: dict, readers_cpu_ms: dict, stop: threading.Event) -> dict:
    """The closed loop again, against Label Studio on the same PostgreSQL, same gunicorn settings, same
    harness and number of clients; prints both side by side."""
    venv = Path(args.label_studio_venv)
    if args.reuse_database and (OUT / "label-studio-setup.json").exists():
        setup = json.loads((OUT / "label-studio-setup.json").read_text())
    else:
        setup = set_up_label_studio(venv, args.label_studio_database_url, args.pairs, args.readers)
    port = free_port()
    log_path = OUT / f"label-studio-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}.log"
    print(f"\n== Label Studio under gunicorn: {args.workers} sync workers on {LOOPBACK}:{port}", flush=True)
    server = start_label_studio(venv, args.label_studio_database_url, port, args.workers, log_path)
    meter = CpuMeter(server.pid)
    tokens, projects = setup["tokens"], setup["projects"]
    try:
        wait_until_serving(port, "/health", server, timeout=120)
        clients = range(args.readers)
        if args.warmup > 0:
            warm = [(port, tokens[n], 3000 + n, 0.0, projects) for n in clients]
            phase("Label Studio warm-up", label_studio_client, warm, args.warmup, 10_000, stop)
        per_client = [(port, tokens[n], 100 + n, args.think_ms / 1000, projects) for n in clients]
        recorder, elapsed, cpu = measured_phase(
            "Label Studio readers", label_studio_client, per_client, args, stop, meter
        )
        rss = meter.worker_rss_mb()
    finally:
        stop_gunicorn(server)
    rows = [summarize("next", recorder, elapsed), summarize("submit", recorder, elapsed)]
    requests = rows[0]["requests"] + rows[1]["requests"]
    ls_cpu = cpu_per_request(cpu, requests)
    ours = readers_row["requests_per_second"]
    theirs = requests / elapsed if elapsed else float("nan")
    print(f"\n{'':<34} {'ReadingRoom':>12} {'Label Studio':>13} {'ratio':>7}")
    lines = [
        ("reading requests/s", ours, theirs),
        ("next p50 / p99 ms", f"{readers_row['next_p50']:.0f} / {readers_row['next_p99']:.0f}",
         f"{rows[0]['p50']:.0f} / {rows[0]['p99']:.0f}"),
        ("submit p50 / p99 ms", f"{readers_row['submit_p50']:.0f} / {readers_row['submit_p99']:.0f}",
         f"{rows[1]['p50']:.0f} / {rows[1]['p99']:.0f}"),
        ("server CPU ms per request", readers_cpu_ms["server"], ls_cpu["server"]),
        ("PostgreSQL CPU ms per request", readers_cpu_ms["postgres"], ls_cpu["postgres"]),
        ("peak RSS per worker, MB (max)", readers_row["worker_rss_max"], max(rss) if rss else float("nan")),
    ]  # fmt: skip
    for label, mine, other in lines:
        if isinstance(mine, str):
            print(f"{label:<34} {mine:>12} {other:>13}")
        else:
            print(f"{label:<34} {mine:>12.1f} {other:>13.1f} {mine / other if other else float('nan'):>7.2f}")
    errors = sum(row["errors"] for row in rows)
    print(f"Label Studio errors: {errors}; load average {recorder.load_before} -> {recorder.load_after}")
    for message in recorder.error_samples[:5]:
        print(f"   error: {message}")
    # Paced readers ask at the pace they think, whatever the server: the target is the closed loop's.
    target = "paced: the target is the closed loop's" if args.think_ms else f"target: at least {TARGET_PEER_RATIO:.0f}x"
    print(f"Throughput: {ours / theirs if theirs else float('nan'):.1f}x Label Studio's ({target})")
    return {
        "rows": rows,
        "requests_per_second": theirs,
        "cpu_ms_per_request": ls_cpu,
        "worker_peak_rss_mb": rss,
        "errors": errors,
        "error_samples": recorder.error_samples,
        "throughput_ratio": ours / theirs if theirs else None,
        "load_average": [recorder.load_before, recorder.load_after],
    }


def phase(name: str, target, per_client: list[tuple], duration: float, max_requests: int, stop: threading.Event):
    """Run one client thread per argument tuple until the deadline or the request cap: (recorder, seconds)."""
    recorder = Recorder(max_requests=max_requests, deadline=time.monotonic() + duration, stop=stop)
    threads = [threading.Thread(target=target, args=(recorder, *args), daemon=True) for args in per_client]
    recorder.load_before = load_average()
    # The load average counts everything on the machine; before a phase, it shows other work.
    print(f"\n== {name}: {len(threads)} clients, load average before {recorder.load_before}", flush=True)
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(timeout=0.5)
    elapsed = time.perf_counter() - started
    total = sum(recorder.attempts.values())
    recorder.load_after = load_average()
    print(f"   {total} requests in {elapsed:.1f} s ({total / elapsed:.0f}/s), load average after {recorder.load_after}")
    return recorder, elapsed


def load_average() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


# --- Processes: CPU and memory, read from /proc ------------------------------------------------------

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name (which may hold spaces)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def cpu_seconds(pid: int, *, children: bool = False) -> float:
    """User + system CPU of a process; with children, also of its exited children it waited for."""
    try:
        fields = _stat_fields(pid)
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    # After the name: state(0) ... utime(11) stime(12) cutime(13) cstime(14).
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / CLOCK_TICKS


def child_pids(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


def postgres_pids() -> list[int]:
    """The PostgreSQL server's processes on this machine: the postmaster first, then its children."""
    names: dict[int, str] = {}
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                names[int(entry.name)] = (entry / "comm").read_text().strip()
                parents[int(entry.name)] = int(_stat_fields(int(entry.name))[1])
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                continue
    postmasters = [pid for pid, name in names.items() if name == "postgres" and names.get(parents[pid]) != "postgres"]
    return postmasters[:1] + [child for pid in postmasters[:1] for child in child_pids(pid)]


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident memory (VmHWM), in MB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except FileNotFoundError:
        pass
    return float("nan")


@dataclass
class CpuMeter:
    """CPU time of the gunicorn master's workers and of the PostgreSQL server, including exited processes
    (a master's or postmaster's waited-for children), and of this harness's own threads (the simulated
    readers share the machine's cores with what they measure). Read before and after a phase: the
    difference is what the phase cost each, whatever else the machine does."""

    server_pid: int

    def read(self) -> dict[str, float]:
        server = cpu_seconds(self.server_pid, children=True)
        server += sum(cpu_seconds(pid) for pid in child_pids(self.server_pid))
        postgres = postgres_pids()
        database = cpu_seconds(postgres[0], children=True) if postgres else float("nan")
        database += sum(cpu_seconds(pid) for pid in postgres[1:])
        own = os.times()
        return {"server": server, "postgres": database, "harness": own.user + own.system}

    def worker_rss_mb(self) -> list[float]:
        return [peak_rss_mb(pid) for pid in child_pids(self.server_pid)]


# --- Results ------------------------------------------------------------------------------------


def percentile(ordered: list[float], p: float) -> float:
    """Nearest-rank percentile of a sorted list."""
    if not ordered:
        return float("nan")
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def summarize(operation: str, recorder: Recorder, elapsed: float) -> dict:
    ordered = sorted(recorder.latencies[operation])
    return {
        "operation": operation,
        "requests": recorder.attempts[operation],
        "errors": recorder.errors[operation],
        "per_second": recorder.attempts[operation] / elapsed if elapsed else 0.0,
        "p50": percentile(ordered, 50),
        "p95": percentile(ordered, 95),
        "p99": percentile(ordered, 99),
        "max": ordered[-1] if ordered else float("nan"),
    }


def print_table(rows: list[dict], floor_p99: float) -> None:
    header = f"{'operation':<10} {'requests':>9} {'errors':>7} {'req/s':>7} {'p50':>8} {'p95':>8} {'p99':>8} {'max':>8}"
    print("\n" + header + f" {'p99/floor':>10}")
    print("-" * (len(header) + 11))
    for row in rows:
        ratio = row["p99"] / floor_p99 if floor_p99 else float("nan")
        print(
            f"{row['operation']:<10} {row['requests']:>9} {row['errors']:>7} {row['per_second']:>7.0f} "
            f"{row['p50']:>8.1f} {row['p95']:>8.1f} {row['p99']:>8.1f} {row['max']:>8.1f} {ratio:>10.2f}"
        )
    print("(latencies in ms, measured by the client: connect, request, full response)")


def verify_submits(submitted: list[tuple[str, str]]) -> dict:
    """Every successful submit is stored: an Annotation with its form token, on its assignment."""
    from annotation.models import Annotation

    stored: dict[str, str] = {}
    tokens = [token for _, token in submitted]
    for start in range(0, len(tokens), 5000):
        rows = Annotation.objects.filter(form_token__in=tokens[start : start + 5000]).values_list(
            "form_token", "assignment__public_id"
        )
        stored.update({str(token): str(assignment) for token, assignment in rows})
    missing = [(a, t) for a, t in submitted if stored.get(str(uuid.UUID(t))) != str(uuid.UUID(a))]
    return {"successful_submits": len(submitted), "stored": len(submitted) - len(missing), "missing": len(missing)}


def server_errors(log_path: Path) -> int:
    text = log_path.read_text(errors="replace")
    return text.count("Traceback") + text.count("[CRITICAL]")


# --- Main ---------------------------------------------------------------------------------------


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def measured_phase(name, target, per_client, args, stop, meter: CpuMeter, duration: float | None = None):
    """A phase (of --duration seconds unless given) with the server's and the database's CPU over it:
    (recorder, seconds, cpu seconds by process)."""
    before = meter.read()
    duration = args.duration if duration is None else duration
    recorder, elapsed = phase(name, target, per_client, duration, args.max_requests, stop)
    after = meter.read()
    return recorder, elapsed, {key: after[key] - before[key] for key in before}


def in_turns(floor_args, reader_args, args, stop, meter: CpuMeter):
    """The floor and the readers in turns, --rounds of each, each turn a --rounds'th of --duration.

    On a shared machine, what else it does changes the CPU a request costs (by half, seen here,
    between two runs a minute apart): in turns, it falls on the floor and the readers alike. Each
    phase's turns are then added up: (recorder, seconds, cpu) of the floor, the same of the readers,
    and each round's ratio of the readers' server CPU per request to the floor's."""
    turn = args.duration / args.rounds
    floor_turns, reader_turns, ratios = [], [], []
    for number in range(1, args.rounds + 1):
        floor_turn = measured_phase(f"floor, round {number}", floor_client, floor_args, args, stop, meter, turn)
        reader_turn = measured_phase(f"readers, round {number}", reader_client, reader_args, args, stop, meter, turn)
        floor_turns.append(floor_turn)
        reader_turns.append(reader_turn)
        floor_per = cpu_per_request(floor_turn[2], sum(floor_turn[0].attempts.values()))
        reader_per = cpu_per_request(
            reader_turn[2], reader_turn[0].attempts["next"] + reader_turn[0].attempts["submit"]
        )
        ratios.append(reader_per["server"] / floor_per["server"] if floor_per["server"] else float("nan"))
        print(f"   round {number}: reading server CPU {ratios[-1]:.2f}x the floor's", flush=True)
    return added_up(floor_turns), added_up(reader_turns), ratios


def added_up(turns: list[tuple]) -> tuple:
    """One phase's turns as one: their recorders merged, their seconds and CPU added."""
    recorders = [recorder for recorder, _, _ in turns]
    total = Recorder(max_requests=0, deadline=0.0, stop=recorders[0].stop)
    for recorder in recorders:
        for operation, latencies in recorder.latencies.items():
            total.latencies[operation] += latencies
        for counts, more in ((total.attempts, recorder.attempts), (total.errors, recorder.errors),
                             (total.other, recorder.other)):  # fmt: skip
            for key, value in more.items():
                counts[key] += value
        total.error_samples += recorder.error_samples[: 20 - len(total.error_samples)]
        total.submitted += recorder.submitted
    total.load_before, total.load_after = recorders[0].load_before, recorders[-1].load_after
    elapsed = sum(seconds for _, seconds, _ in turns)
    cpu = {key: sum(turn_cpu[key] for _, _, turn_cpu in turns) for key in turns[0][2]}
    return total, elapsed, cpu


def cpu_per_request(cpu: dict[str, float], requests: int) -> dict[str, float]:
    """Milliseconds of CPU per request, of the application server and of PostgreSQL."""
    if not requests:
        return {key: float("nan") for key in cpu}
    return {key: 1000 * value / requests for key, value in cpu.items()}


def print_cpu(name: str, per_request: dict[str, float], floor: dict[str, float]) -> None:
    ratio = per_request["server"] / floor["server"] if floor["server"] else float("nan")
    print(
        f"{name:<24} server CPU {per_request['server']:6.1f} ms/request ({ratio:4.2f}x the floor's), "
        f"PostgreSQL CPU {per_request['postgres']:5.1f} ms/request"
    )


def capacity(port, tokens, args, stop, meter) -> tuple[int, list[dict]]:
    """Raise the number of paced readers by --step until the p99 of next or submit passes the target:
    (the last count that held it, one row per count tried)."""
    think = (args.think_ms or 1000.0) / 1000
    held, steps = 0, []
    for count in range(args.readers, min(args.max_readers, len(tokens)) + 1, args.step):
        clients = [(port, tokens[n], 5000 + count * 1000 + n, think) for n in range(count)]
        recorder, elapsed, cpu = measured_phase(f"capacity: {count} readers", reader_client, clients, args, stop, meter)
        rows = [summarize(op, recorder, elapsed) for op in ("next", "submit")]
        requests = sum(row["requests"] for row in rows)
        errors = sum(row["errors"] for row in rows)
        slowest = max(row["p99"] for row in rows)
        per = cpu_per_request(cpu, requests)
        done = sum(n for what, n in recorder.other.items() if "queue done" in what)
        steps.append(
            {"readers": count, "requests_per_second": requests / elapsed, "next_p99": rows[0]["p99"],
             "submit_p99": rows[1]["p99"], "errors": errors, "cpu_ms": per, "load": recorder.load_after,
             "queue_done_answers": done}
        )  # fmt: skip
        print(
            f"   {count} readers: {requests / elapsed:.0f} req/s, p99 next {rows[0]['p99']:.0f} ms, "
            f"submit {rows[1]['p99']:.0f} ms, errors {errors}, CPU per request: server {per['server']:.1f} ms, "
            f"PostgreSQL {per['postgres']:.1f} ms, harness {per['harness']:.1f} ms; {done} answers 'queue done'"
        )
        if errors or slowest >= TARGET_P99_MS:
            break
        held = count
    return held, steps


def main(argv: list[str] | None = None) -> int:
    cores = os.cpu_count() or 1
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=f"postgres://postgres@{LOOPBACK}:5432/readingroom_bench")
    parser.add_argument("--pairs", type=int, default=50_000)
    parser.add_argument("--readers", type=int, default=20, help="concurrent clients (capacity mode: the first count)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds per phase (floor, readers)")
    parser.add_argument(
        "--rounds", type=int, default=4, help="the floor and the readers in this many turns each, alternating"
    )
    parser.add_argument("--max-requests", type=int, default=200_000, help="cap on requests per phase")
    parser.add_argument("--workers", type=int, default=2 * cores + 1, help="gunicorn workers (default 2*cores+1)")
    parser.add_argument("--first-reads", type=float, default=0.0, help="share of examples with a stored first read")
    parser.add_argument(
        "--think-ms",
        type=float,
        default=0.0,
        help="mean pause of a client between items, drawn from 0.5x-1.5x (default: none, a closed loop)",
    )
    parser.add_argument(
        "--capacity",
        action="store_true",
        help="after the floor, raise the number of paced readers (think time --think-ms, 1000 if unset) by --step "
        "until the p99 of next or submit passes 100 ms; print the last count held",
    )
    parser.add_argument("--step", type=int, default=20, help="capacity mode: readers added per round")
    parser.add_argument("--max-readers", type=int, default=200, help="capacity mode: readers in the study, and the cap")
    parser.add_argument(
        "--label-studio-venv",
        help="a virtual environment with label-studio==1.23.2 and gunicorn: after ReadingRoom's readers, run the "
        "same readers against Label Studio (same PostgreSQL, gunicorn settings and harness) and compare",
    )
    parser.add_argument(
        "--label-studio-database-url", default=f"postgres://postgres@{LOOPBACK}:5432/readingroom_bench_ls"
    )
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds of unrecorded load first")
    parser.add_argument("--reuse-database", action="store_true", help="skip creating and generating the database")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)  # a plain `kill` stops gunicorn too, like Ctrl+C
    name = check_database_url(args.database_url)
    env = server_environment(args.database_url)
    OUT.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    setup_log: list[str] = []
    study_readers = max(args.readers, args.max_readers) if args.capacity else args.readers

    if not args.reuse_database:
        print(f"== database {name}: dropped and created again", flush=True)
        recreate_database(args.database_url, name)
        run("migrate", [PYTHON, "manage.py", "migrate", "--no-input", "-v", "1"], env)
        generate = [PYTHON, "bench/generate_study.py", f"--pairs={args.pairs}", f"--readers={study_readers}"]
        generate += [f"--database-url={args.database_url}", f"--slug={SLUG}", f"--first-reads={args.first_reads}"]
        setup_log = run("generate_study", generate, env)
        run("collectstatic", [PYTHON, "manage.py", "collectstatic", "--no-input", "-v", "0"], env)
        checkpoint(args.database_url)

    setup_django(env)
    from django.db import connections

    tokens = reader_tokens(SLUG)
    ids = floor_ids(SLUG, 20_000)
    connections.close_all()
    if len(tokens) < args.readers:
        sys.exit(f"The study has {len(tokens)} readers with tokens; asked for {args.readers} clients.")

    port = free_port()
    log_path = OUT / f"gunicorn-{stamp}.log"
    print(f"\n== gunicorn: {args.workers} sync workers on {LOOPBACK}:{port} (log: {log_path})", flush=True)
    server = start_gunicorn(env, port, args.workers, log_path)
    meter = CpuMeter(server.pid)
    stop = threading.Event()
    results: dict = {
        "started": stamp,
        "cores": cores,
        "workers": args.workers,
        "clients": args.readers,
        "pairs": args.pairs,
        "think_ms": args.think_ms,
        "first_reads": args.first_reads,
        "reused_database": args.reuse_database,
    }
    capacity_steps: list[dict] = []
    held = None
    try:
        wait_until_serving(port, f"/bench/floor/{ids[0]}/", server)
        clients = range(args.readers)
        think = args.think_ms / 1000
        if args.warmup > 0:
            # Every worker connects to the database and fills its caches before anything is recorded.
            warm_floor = [(port, ids, 1000 + n, 0.0) for n in clients]
            phase("warm-up (floor)", floor_client, warm_floor, args.warmup / 2, 10_000, stop)
            warm_readers = [(port, tokens[n], 2000 + n, 0.0) for n in clients]
            phase("warm-up (readers)", reader_client, warm_readers, args.warmup / 2, 10_000, stop)
        floor_args = [(port, ids, n, think) for n in clients]
        if args.capacity:
            floor, floor_elapsed, floor_cpu = measured_phase("floor", floor_client, floor_args, args, stop, meter)
            held, capacity_steps = capacity(port, tokens, args, stop, meter)
            readers, readers_elapsed, readers_cpu, rows_before, rows_after = None, 0.0, {}, 0, 0
        else:
            reader_args = [(port, tokens[n], 100 + n, think) for n in clients]
            rows_before = work_rows_read()
            (floor, floor_elapsed, floor_cpu), (readers, readers_elapsed, readers_cpu), round_ratios = in_turns(
                floor_args, reader_args, args, stop, meter
            )
            rows_after = work_rows_read()
        worker_rss = meter.worker_rss_mb()
    except KeyboardInterrupt:
        stop.set()
        print("\nInterrupted: stopping gunicorn.", file=sys.stderr)
        return 130
    finally:
        stop.set()
        stop_gunicorn(server)

    floor_row = summarize("floor", floor, floor_elapsed)
    floor_per = cpu_per_request(floor_cpu, floor_row["requests"])
    print(f"\nLoad average: floor {floor.load_before} -> {floor.load_after}", end="")
    if args.capacity:
        print()
        print_cpu("floor", floor_per, floor_per)
        print(f"\nCapacity: {held} paced readers held p99 < {TARGET_P99_MS:.0f} ms for next and submit.")
        for step in capacity_steps:
            print(
                f"   {step['readers']:>4} readers  {step['requests_per_second']:6.0f} req/s  p99 next "
                f"{step['next_p99']:7.1f}  submit {step['submit_p99']:7.1f} ms  server CPU "
                f"{step['cpu_ms']['server']:5.1f} ms/request ({step['cpu_ms']['server'] / floor_per['server']:.2f}x "
                f"the floor's), PostgreSQL {step['cpu_ms']['postgres']:4.1f} ms, harness "
                f"{step['cpu_ms']['harness']:4.1f} ms  load {step['load']}"
            )
        print(f"Peak RSS per worker: max {max(worker_rss):.0f} MB, mean {sum(worker_rss) / len(worker_rss):.0f} MB")
        results.update(floor=floor_row, floor_cpu_ms=floor_per, capacity=capacity_steps, capacity_held=held,
                       worker_peak_rss_mb=worker_rss)  # fmt: skip
        result_path = OUT / f"reading-capacity-{stamp}.json"
        result_path.write_text(json.dumps(results, indent=2))
        print(f"Results: {result_path}")
        return 0 if held and held >= CAPACITY_TARGET else 1

    print(f", readers {readers.load_before} -> {readers.load_after}")
    rows = [floor_row, summarize("next", readers, readers_elapsed), summarize("submit", readers, readers_elapsed)]
    floor_p99 = rows[0]["p99"]
    print_table(rows, floor_p99)
    reader_requests = rows[1]["requests"] + rows[2]["requests"]
    readers_per = cpu_per_request(readers_cpu, reader_requests)
    print()
    print_cpu("floor", floor_per, floor_per)
    print_cpu("reading (next + submit)", readers_per, floor_per)
    print(
        f"Reading server CPU against the floor's, round by round: {', '.join(f'{r:.2f}x' for r in round_ratios)} "
        f"(median {statistics.median(round_ratios):.2f}x; the target is judged on all rounds together, above)"
    )
    print(
        f"Closed-loop throughput: {reader_requests / readers_elapsed:.1f} reading requests/s"
        if not think
        else f"Paced throughput: {reader_requests / readers_elapsed:.1f} reading requests/s"
    )
    print(f"Peak RSS per worker: max {max(worker_rss):.0f} MB, mean {sum(worker_rss) / len(worker_rss):.0f} MB")
    if reader_requests:
        print(
            f"Rows read from the work tables per reader request (next or submit): "
            f"{(rows_after - rows_before) / reader_requests:.1f} ({rows_after - rows_before} rows, "
            f"{reader_requests} requests)"
        )
    for message in floor.error_samples + readers.error_samples:
        print(f"   error: {message}")
    for what, count in readers.other.items():
        print(f"   {what}: {count}")
    check = verify_submits(readers.submitted)
    tracebacks = server_errors(log_path)
    print(
        f"\nSubmits verified in the database: {check['stored']} of {check['successful_submits']} stored, "
        f"missing = {check['missing']}. Server tracebacks: {tracebacks}."
    )
    peer = None
    if args.label_studio_venv:
        ours = {
            "requests_per_second": reader_requests / readers_elapsed,
            "next_p50": rows[1]["p50"],
            "next_p99": rows[1]["p99"],
            "submit_p50": rows[2]["p50"],
            "submit_p99": rows[2]["p99"],
            "worker_rss_max": max(worker_rss),
        }
        peer = compare_with_label_studio(args, ours, readers_per, threading.Event())
    errors = sum(row["errors"] for row in rows) + tracebacks
    slowest = max(rows[1]["p99"], rows[2]["p99"])
    cpu_ratio = readers_per["server"] / floor_per["server"] if floor_per["server"] else float("nan")
    targets = {
        "no errors, nothing missing": errors == 0 and check["missing"] == 0,
        f"server CPU per reading request within {TARGET_CPU_RATIO:.0f}x the floor's": cpu_ratio <= TARGET_CPU_RATIO,
    }
    if think:
        # With readers at a human pace the machine is not saturated: their latency is the target.
        targets[f"p99 of next and submit < {TARGET_P99_MS:.0f} ms"] = slowest < TARGET_P99_MS
    if peer is not None and not think:
        targets[f"at least {TARGET_PEER_RATIO:.0f}x Label Studio's throughput"] = (
            peer["throughput_ratio"] is not None and peer["throughput_ratio"] >= TARGET_PEER_RATIO
        )
    for target, held in targets.items():
        print(f"Target: {target}: {'met' if held else 'MISSED'}")
    met = all(targets.values())
    results.update(
        rows=rows,
        cpu_ms_per_request={"floor": floor_per, "reading": readers_per},
        server_cpu_ratio=cpu_ratio,
        server_cpu_ratio_by_round=round_ratios,
        worker_peak_rss_mb=worker_rss,
        rows_read_per_request=(rows_after - rows_before) / reader_requests if reader_requests else None,
        verification=check,
        server_tracebacks=tracebacks,
        other=dict(readers.other),
        error_samples=floor.error_samples + readers.error_samples,
        load_average={
            "floor": [floor.load_before, floor.load_after],
            "readers": [readers.load_before, readers.load_after],
        },
        setup=setup_log,
        target_met=met,
        label_studio=peer,
    )
    result_path = OUT / f"reading-{stamp}.json"
    result_path.write_text(json.dumps(results, indent=2))
    print(f"Results: {result_path}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
