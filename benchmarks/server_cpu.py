"""The CPU time a PostgreSQL server spends for a benchmark, read from ``/proc`` (a sibling script).

Both ``host_path.py`` and ``postgres_bench.py`` report the server's CPU per write and per turn
next to the client's: :func:`server_cpu` reads each backend process's user + system time once
before and once after the work, :func:`cpu_used` subtracts the two readings. Only a server on
this machine can be read (its processes' ``/proc/<pid>/stat``); for any other the readings are
empty and the figure is ``nan``.
"""

from __future__ import annotations

import os
from pathlib import Path


def server_cpu(url: str | None, application_name: str | None = None) -> dict[int, float]:
    """CPU seconds used so far by each backend process of ``url``'s database other than the one
    asking (only those connected as ``application_name`` when given), by process id; empty for
    no URL, an unreachable server, a server elsewhere or unreadable processes."""
    if not url:
        return {}
    import psycopg

    query = "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
    params: tuple[str, ...] = ()
    if application_name is not None:
        query += " AND application_name = %s"
        params = (application_name,)
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            pids = [int(row[0]) for row in conn.execute(query, params)]
    except psycopg.Error:
        return {}
    tick = os.sysconf("SC_CLK_TCK")
    used = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        used[pid] = (int(fields[11]) + int(fields[12])) / tick
    return used


def cpu_used(before: dict[int, float], after: dict[int, float]) -> float:
    """Server CPU seconds between two :func:`server_cpu` readings; ``nan`` when the later one is
    empty (nothing could be read)."""
    if not after:
        return float("nan")
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())
