"""gunicorn's settings for ReadingRoom's web servers: gunicorn -c deploy/gunicorn.conf.py config.wsgi

Every value can be changed from the environment (GUNICORN_*), so one file serves every host.
"""

import multiprocessing
import os


def _int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
# Sync workers: a reading request is short and the database does the waiting. Each holds its own
# small connection pool (DATABASE_POOL_MAX_SIZE); workers x pool size must stay under PostgreSQL's
# max_connections, summed over every host.
workers = _int("GUNICORN_WORKERS", 2 * multiprocessing.cpu_count() + 1)
worker_class = "sync"
# A page or API request that takes longer is stuck: it is killed and answered 502 by the proxy.
# Release builds and results never run in a web request (the worker runs them).
timeout = _int("GUNICORN_TIMEOUT", 60)
graceful_timeout = _int("GUNICORN_GRACEFUL_TIMEOUT", 30)
keepalive = _int("GUNICORN_KEEPALIVE", 5)
# Each worker is replaced after this many requests (with jitter, so not all at once): memory stays flat.
max_requests = _int("GUNICORN_MAX_REQUESTS", 2000)
max_requests_jitter = _int("GUNICORN_MAX_REQUESTS_JITTER", 200)
# Request limits: gunicorn's defaults, written out; bodies are limited by Django
# (DATA_UPLOAD_MAX_MEMORY_SIZE, READINGROOM_IMPORT_MAX_BYTES).
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190
# Trust X-Forwarded-* only from the load balancer (set it to its address; SECURE_PROXY_SSL=1 in Django).
forwarded_allow_ips = os.environ.get("GUNICORN_FORWARDED_ALLOW_IPS", "127.0.0.1")
# No preload: each worker opens its own database pool after the fork.
preload_app = False
accesslog = os.environ.get("GUNICORN_ACCESSLOG", "-")
errorlog = "-"
loglevel = os.environ.get("GUNICORN_LOGLEVEL", "info")
