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
* **RSS MB**: the peak resident memory (VmHWM) of the run's process, which wrote and then
  answered (the texts are generated on the fly, so the driver itself holds little).

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

from dev_data import DATA, LOCOMO, locomo_conversations, locomo_turn_text  # a sibling script, not a package

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


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One run: fill a fresh memory, then time the turns; the figures as a dict."""
    import logging

    logging.disable(logging.WARNING)  # a version's warnings would be timed too
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

    cls = _load(spec["load"])
    module = sys.modules[cls.__module__]
    base = base_exchanges(Path(spec["data"]))
    asks = questions(Path(spec["data"]))
    sessions = int(spec["sessions"])
    root = spec["root"]
    mem = cls({"root": root, "db_path": str(Path(root) / "lexical.db"), **spec["config"]})
    write_wall = write_cpu = 0.0
    for i, user, assistant in exchanges(int(spec["exchanges"]), base):
        messages = pair(user, assistant)
        t0, c0 = time.perf_counter(), time.process_time()
        mem.update_history(messages, f"host-{i % sessions}")
        write_wall += time.perf_counter() - t0
        write_cpu += time.process_time() - c0
    n_q = int(spec["questions"])
    for j in range(WARM_UP):
        mem.build_conversation_context(asks[-1 - j % len(asks)], f"host-{j % sessions}")
    wall, cpu = [], []
    for j in range(n_q):
        t0, c0 = time.perf_counter(), time.process_time()
        mem.build_conversation_context(asks[j % len(asks)], f"host-{j % sessions}")
        wall.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    out = {
        "module": getattr(module, "__file__", ""),
        "exchanges": int(spec["exchanges"]),
        "writes_s": int(spec["exchanges"]) / write_wall if write_wall else float("nan"),
        "write_cpu_us": 1e6 * write_cpu / max(int(spec["exchanges"]), 1),
        "p50": _pct(wall, 50),
        "p95": _pct(wall, 95),
        "cpu_p50": _pct(cpu, 50),
        "cpu_p95": _pct(cpu, 95),
        "cpu_mean": statistics.fmean(cpu) if cpu else float("nan"),
        "rss_peak": _status("VmHWM"),
        "rss_end": _status("VmRSS"),
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


def run_once(version: Version, n: int, args: argparse.Namespace) -> dict[str, Any]:
    """One run of one version in a fresh subprocess and a fresh temporary folder."""
    with tempfile.TemporaryDirectory(prefix="host-path-") as root:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update({"HOME": root, "XDG_DATA_HOME": root, "XDG_CONFIG_HOME": root, "XDG_CACHE_HOME": root})
        if version.pythonpath:
            env["PYTHONPATH"] = version.pythonpath
        spec = {"load": version.load, "exchanges": n, "questions": args.questions, "sessions": args.sessions}
        spec.update(root=root, data=str(args.data), config=version.config)
        done = subprocess.run(
            [version.python, str(Path(__file__).resolve()), "--worker", json.dumps(spec)],
            capture_output=True,
            text=True,
            env=env,
            cwd=root,
        )
        if done.returncode != 0:
            raise SystemExit(f"{version.label} failed:\n{done.stderr[-3000:]}")
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))


FIGURES = [("writes_s", "writes/s", False), ("write_cpu_us", "CPU us/w", True), ("p50", "p50 ms", True)]
FIGURES += [("p95", "p95 ms", True), ("cpu_p50", "CPU p50", True), ("cpu_p95", "CPU p95", True)]
FIGURES += [("cpu_mean", "CPU mean", True)]
FIGURES += [("rss_peak", "RSS MB", True)]


def _row(label: str, r: dict[str, Any]) -> str:
    return f"{label[:34]:<35}" + "".join(
        f"{r[k]:>10.0f}"
        if k in ("writes_s", "write_cpu_us")
        else f"{r[k]:>10.2f}"
        if k.startswith("cpu_")
        else f"{r[k]:>10.1f}"
        for k, _, _ in FIGURES
    )


def _ratio(mine: float, other: float, lower_is_better: bool) -> float:
    """How many times better ``mine`` is than ``other`` (above 1: mine is better)."""
    if not (mine and other):
        return float("nan")
    return other / mine if lower_is_better else mine / other


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="*", default=["."], help=". or a path, git:<commit>, python:<interpreter>")
    parser.add_argument("--exchanges", default="30000", help="comma-separated memory sizes (exchanges)")
    parser.add_argument("--runs", type=int, default=2, help="runs per version and size, alternating")
    parser.add_argument("--questions", type=int, default=400, help="turns timed per run")
    parser.add_argument("--sessions", type=int, default=50)
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
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    if not (args.data / LOCOMO).exists():
        print(f"SKIPPED: {args.data / LOCOMO} is absent (see ../shared/bench/README.md).")
        return 0
    sizes = [int(s) for s in args.exchanges.split(",") if s.strip()]
    load = os.getloadavg()
    models = [
        line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if "model name" in line
    ]
    cpu = models[0] if models else "?"
    print(f"# host's path: {os.cpu_count()} CPUs ({cpu}), load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    results: list[dict[str, Any]] = []
    worktrees: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="host-path-versions-") as tmp:
        try:
            versions = [resolve(v, Path(tmp), args.entry_point, worktrees, args.plugin) for v in args.versions]
            for size in sizes:
                print(f"\n## {size:,} exchanges, {args.sessions} sessions, {args.questions} turns")
                print(f"{'version':<35}" + "".join(f"{name:>10}" for _, name, _ in FIGURES))
                for run in range(args.runs):
                    order = versions if run % 2 == 0 else versions[::-1]
                    for version in order:
                        r = run_once(version, size, args)
                        r.update(version=version.label, run=run)
                        results.append(r)
                        print(_row(f"{version.label} #{run + 1}", r), flush=True)
                print(f"{'median':<35}")
                medians = {}
                for version in versions:
                    mine = [r for r in results if r["version"] == version.label and r["exchanges"] == size]
                    medians[version.label] = {k: statistics.median(r[k] for r in mine) for k, _, _ in FIGURES}
                    print(_row(version.label, medians[version.label]))
                first = medians[versions[0].label]
                for version in versions[1:]:
                    other = medians[version.label]
                    ratios = [_ratio(first[k], other[k], lower) for k, _, lower in FIGURES]
                    print(
                        f"{versions[0].label[:20]} vs {version.label[:12]:<12} "
                        + "".join(f"{x:>9.2f}x" for x in ratios)
                        + "  (>1: the first is better)"
                    )
        finally:
            for where in worktrees:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)], check=False)
    end = os.getloadavg()
    print(f"\nload average at the end {end[0]:.2f} {end[1]:.2f} {end[2]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
