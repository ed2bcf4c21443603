"""gunicorn's settings for ConsumerBench's web server: docker-compose.yml runs ``gunicorn -c
deploy/gunicorn.conf.py``, and so does the stack that tests and benchmarks/perf/web_load.py start.

Worker class gthread: each process serves WEB_THREADS requests at once. A page or API request mostly
waits on PostgreSQL, so a slow request holds one thread, not a whole process, while the others go on.
One process per core (WEB_CONCURRENCY, 2 by default): the GIL lets a process use about one core, and
more threads than 8 per process only add contention and database connections (workers x threads,
each kept for DATABASE_CONN_MAX_AGE; 16 by default, far under PostgreSQL's 100). The reverse proxy in
front (deploy/nginx.conf.template) reads every request body and buffers every response, so a slow
client never holds a thread here, and it gives up on a request (30 s) before ``timeout`` below.
"""

from __future__ import annotations

import os

# Inside the compose network only: the proxy is the one published port. A command-line --bind wins.
bind = ["0.0.0.0:8000"]
worker_class = "gthread"
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
threads = int(os.environ.get("WEB_THREADS", "8"))
# A worker process whose main loop is silent this long is restarted. gthread's main loop runs apart
# from the request threads, so this is the bound on a stuck process, not on one request: requests are
# bounded by the proxy (30 s) and by PostgreSQL's statement timeout (CB_DB_STATEMENT_TIMEOUT_MS).
timeout = 60
graceful_timeout = 30
keepalive = 5
# Restart each process after about this many requests: a slow leak cannot grow without bound.
max_requests = 2000
max_requests_jitter = 200
# The heartbeat file on memory, not on the container's overlay file system (which can stall it).
worker_tmp_dir = "/dev/shm"
accesslog = "-"
