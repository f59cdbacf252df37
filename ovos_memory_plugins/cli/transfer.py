"""The commands that move memories: export, import, ingest, migrate."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ovos_memory_plugins.cli.opening import location_of, open_memory
from ovos_memory_plugins.cli.output import CommandError, Output, progress_bar
from ovos_memory_plugins.errors import OvosMemoryPluginError


def cmd_export(args: argparse.Namespace, output: Output) -> int:
    from ovos_memory_plugins.transfer import export_jsonl

    with open_memory(args, output, read_only=True) as memory:
        where = location_of(memory)
        if args.file in (None, "-"):
            n = export_jsonl(memory, output.out)
            output.note(f"exported {n} document(s) from {where}")
            return 0
        target = Path(args.file)
        tmp = target.with_name(target.name + ".part")
        try:
            with tmp.open("w", encoding="utf-8") as fp:
                n = export_jsonl(memory, fp)
                fp.flush()
                os.fsync(fp.fileno())
            tmp.replace(target)
        finally:
            tmp.unlink(missing_ok=True)
    output.emit(
        {"exported": n, "file": str(target), "root": where}, f"exported {n} document(s) from {where} to {target}"
    )
    return 0


def cmd_import(args: argparse.Namespace, output: Output) -> int:
    from ovos_memory_plugins.transfer import import_jsonl, read_export

    # every line is read and checked before anything is written: a bad line imports nothing
    try:
        if args.file == "-":
            docs = list(read_export(sys.stdin, "<stdin>"))
        else:
            with open(args.file, encoding="utf-8") as fp:
                docs = list(read_export(fp, args.file))
    except OSError as exc:
        raise CommandError(f"cannot read {args.file}: {exc.strerror or exc}") from exc
    except OvosMemoryPluginError as exc:
        raise CommandError(f"{exc}; nothing was imported") from exc
    with open_memory(args, output) as memory, progress_bar(len(docs), "doc", output, args.quiet) as bar:
        report = import_jsonl(memory, docs, progress=bar.update)
        where = location_of(memory)
    for reason in report.reasons:
        output.note(f"warning: {reason}")
    output.emit(
        {"imported": report.imported, "notes": report.notes, "skipped": report.skipped, "root": where},
        f"imported {report.imported} of {len(docs)} line(s) into {where}"
        + (f" ({report.notes} as notes)" if report.notes else "")
        + (f", skipped {report.skipped}" if report.skipped else ""),
    )
    return 0


def cmd_ingest(args: argparse.Namespace, output: Output) -> int:
    from ovos_memory_plugins.transfer import TranscriptError, collect_files, ingest_paths

    try:
        files = collect_files(Path(p) for p in args.paths)
    except FileNotFoundError as exc:
        raise CommandError(str(exc)) from exc
    with open_memory(args, output) as memory, progress_bar(len(files), "file", output, args.quiet) as bar:
        try:
            report = ingest_paths(memory, files, args.session, progress=lambda *_: bar.update(1))
        except TranscriptError as exc:
            raise CommandError(str(exc)) from exc
        where = location_of(memory)
    data = {
        "files": report.files,
        "exchanges": report.exchanges,
        "documents": report.documents,
        "new": report.new,
        "root": where,
    }
    output.emit(
        data,
        f"ingested {report.files} file(s) into {where}: {report.exchanges} exchange(s),"
        f" {report.documents} text chunk(s)"
        + (f"; {report.new} new (the rest were already there)" if report.new is not None else ""),
    )
    return 0


# -- check -------------------------------------------------------------------------------------


#: OpenAI-compatible chat engines and the keys their block needs to reach a model
#: (ovos-openai-plugin reads neither OPENAI_API_KEY nor a default URL).
def cmd_migrate(args: argparse.Namespace, output: Output) -> int:
    from ovos_memory_plugins.storage.migrate import migrate_memory
    from ovos_memory_plugins.storage.registry import redact_url

    bars: dict[str, Any] = {}

    def progress(stage: str, done: int, total: int) -> None:
        bar = bars.get(stage)
        if bar is None:
            bar = bars[stage] = progress_bar(total, stage.split(":")[0], output, args.quiet)
        bar.update(done - bar.n)

    try:
        with open_memory(args, output) as memory:
            report = migrate_memory(memory, args.to, progress=progress)
    finally:
        for bar in bars.values():
            bar.close()
    where = redact_url(args.to)
    text = f'copied {report.describe()} to {where}; point the memory\'s config at it ("database" or "root") to use it'
    output.emit({**report.as_dict(), "to": where}, text)
    return 0
