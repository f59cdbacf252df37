"""The editor's web application: a JSON API under ``/api`` and one static page.

Built on FastAPI (which also serves the OpenAPI document at ``/api/openapi.json``). Every route
is a plain function: FastAPI runs it in a worker thread, and the memory's own lock makes the
calls safe next to a persona using the same instance. The memory is reached through the public
protocols only (see :mod:`ovos_memory_plugins.editor.parts`).

Edits are never lost silently: ``GET /api/notes`` returns a ``version`` and every change sends
it back; when the notes changed in between (the persona wrote to them), the change is refused
with 409 and the page asks to reload. Deleting one note or one document answers with what was
deleted, so the page can offer to undo it (``POST /api/notes/items`` or ``POST
/api/documents`` puts it back); a session and everything are deleted only after a confirmation.
Every error answer carries a ``detail`` written for people.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
import uuid
from importlib import resources
from typing import Any

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from ovos_memory_plugins.dates import stamp
from ovos_memory_plugins.editor.parts import Parts, compact, find_parts, version_of
from ovos_memory_plugins.editor.security import GuardMiddleware, new_token
from ovos_memory_plugins.errors import OvosMemoryPluginError
from ovos_memory_plugins.protocols import Note, NoteChange
from ovos_memory_plugins.transfer import ExportedDocument, iter_documents, where_kept

LOG = logging.getLogger(__name__)

__all__ = ["EditorApp", "make_app"]

STATIC = resources.files("ovos_memory_plugins.editor") / "static"

#: What the page calls each field when a request is refused for it.
FIELD_NAMES = {"text": "the text", "id": "the item", "body": "the notes text", "q": "the search words"}


# -- request bodies ----------------------------------------------------------------------------


class NotesBody(BaseModel):
    """A whole-notes replacement: the new text and the version the page loaded."""

    body: str
    version: str = Field(description="the `version` of the notes the edit was made on")


class NoteText(BaseModel):
    """A note to add (``session_id`` and ``date`` when putting a deleted note back)."""

    text: str = Field(min_length=1)
    session_id: str | None = None
    date: str | None = None


class NoteEdit(BaseModel):
    """A change to one note: its ``id`` (from ``GET /api/notes``), the new ``text`` and the
    ``version`` of the notes the page showed."""

    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    version: str | None = Field(default=None, description="the notes `version` the edit was made on")


class NoteRef(BaseModel):
    """One note (its ``id`` from ``GET /api/notes``) and the ``version`` of the notes the page showed."""

    id: str = Field(min_length=1)
    version: str | None = None


class Document(BaseModel):
    """A document to put back (undo of a delete): as ``DELETE /api/documents/{id}`` returned it."""

    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    session_id: str = "default"
    metadata: dict[str, Any] = Field(default_factory=dict)


class Confirm(BaseModel):
    """Confirmation for deleting: ``confirm`` must be ``"everything"`` (or the session's id)."""

    confirm: str


class Undo(BaseModel):
    """Which dream to undo."""

    id: str


# -- helpers -----------------------------------------------------------------------------------


def _hit(hit: Any) -> dict[str, Any]:
    meta = dict(hit.metadata)
    return {"content": hit.content, "source": hit.source, "score": hit.score, "metadata": meta, "when": stamp(meta)}


def _jsonable(value: Any) -> Any:
    """A verb's result as JSON: dataclasses as dicts, other objects as text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return json.loads(json.dumps(dataclasses.asdict(value), default=str))
    if isinstance(value, (str, int, float, bool, type(None), list, dict)):
        return value
    return str(value)


def _doc(doc: ExportedDocument) -> dict[str, Any]:
    return {
        "id": doc.id,
        "text": doc.text,
        "session_id": doc.session_id,
        "metadata": doc.metadata,
        "when": stamp(doc.metadata),
    }


def _note(note: Note) -> dict[str, Any]:
    data = json.loads(json.dumps(dataclasses.asdict(note), default=str))
    data["status"] = "active" if note.active else "retired"
    return data  # type: ignore[no-any-return]


def _compacted(memory: Any) -> dict[str, Any]:
    """What a delete's answer says about compaction: ``compacted`` (the locations done) and
    ``not_compacted`` (location: why it waits for the next delete, e.g. a busy file)."""
    done = compact(memory)
    return {"compacted": list(done), "not_compacted": dict(done.skipped)}


def _human_validation(exc: RequestValidationError) -> str:
    """A validation error in words: which field, and what is wrong with it."""
    problems = []
    for error in exc.errors():
        field = next((str(p) for p in reversed(error.get("loc", ())) if isinstance(p, str)), "")
        name = FIELD_NAMES.get(field, field or "the request")
        kind = str(error.get("type", ""))
        if kind in ("missing", "string_too_short"):
            problems.append(f"{name} is empty: type something first")
        else:
            problems.append(f"{name} was not understood ({error.get('msg', 'invalid')})")
    return "; ".join(problems) or "the request was not understood"


class EditorApp:
    """The application and its state: the memory, its parts, the token, undo records.

    Args:
        memory: the memory plugin instance.
        token: the per-run token (default: a fresh random one).
        allowed_hosts: accepted ``Host`` header values.
        title: whose memory this is (a persona's name), shown as the page's title.

    Attributes:
        app: the ASGI application to serve (the FastAPI app wrapped in the guard).
        api: the FastAPI application itself.
        guard: the :class:`GuardMiddleware`; set its allowed hosts once the port is known.
        token: the per-run token.
    """

    def __init__(
        self, memory: Any, token: str | None = None, allowed_hosts: set[str] | None = None, title: str | None = None
    ) -> None:
        self.memory = memory
        self.parts: Parts = find_parts(memory)
        self.token = token or new_token()
        self.title = title
        self._dreams: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()
        self.api = self._build()
        self.guard = GuardMiddleware(self.api, self.token, allowed_hosts or set())
        self.app = self.guard

    # -- state -------------------------------------------------------------------------------

    def _notes(self) -> Any:
        if self.parts.notes is None:
            raise HTTPException(404, "This memory keeps no notes.")
        return self.parts.notes

    def _archive(self) -> Any:
        if self.parts.archive is None:
            raise HTTPException(404, "This memory keeps no conversations.")
        return self.parts.archive

    def whose(self) -> dict[str, Any]:
        """Whose memory this is: the persona's name when given, the namespace, the folder, and
        where the data is kept (``where``: the folder, or a database URL without its password)."""
        settings = getattr(self.memory, "settings", None)
        namespace = getattr(settings, "namespace", None)
        root = getattr(self.memory, "root", None)
        label = self.title or (f"namespace {namespace}" if namespace else "this persona")
        return {
            "title": self.title,
            "namespace": namespace,
            "root": str(root) if root else None,
            "where": where_kept(self.memory),
            "label": label,
        }

    def notes_version(self) -> str:
        """The notes' version: the memory's own (:class:`NotesText`), else a digest of the listing."""
        notes = self._notes()
        if self.parts.capabilities()["notes_text"]:
            return str(notes.notes_version())
        listing = [(n.id, n.text, n.retired_on) for n in notes.list_notes(include_retired=True)]
        return version_of(json.dumps(listing, ensure_ascii=False))

    def notes_state(self) -> dict[str, Any]:
        """The notes as the page shows them: ``items`` (active, then retired), their ``version``
        and, where the notes are one text, that ``body``."""
        notes = self._notes()
        items = notes.list_notes(include_retired=True)
        ordered = [n for n in items if n.active] + [n for n in items if not n.active]
        out: dict[str, Any] = {"items": [_note(n) for n in ordered], "version": self.notes_version(), "body": None}
        if self.parts.capabilities()["notes_text"]:
            out["body"] = str(notes.notes_body())
        return out

    def _check_version(self, version: str | None) -> None:
        """409 when the notes changed since the page loaded ``version``."""
        if version is not None and self.notes_version() != version:
            raise HTTPException(
                409, "The notes changed since this page loaded them (the persona wrote to them). Reload and redo."
            )

    @staticmethod
    def _changed(change: NoteChange, what: str = "note") -> NoteChange:
        """Turn a verb's result into an HTTP answer: 404 not found, 409 ambiguous, 400 refused."""
        if change.status == "not_found":
            raise HTTPException(404, f"That {what} is gone (deleted meanwhile?). The list was reloaded.")
        if change.status == "ambiguous":
            raise HTTPException(409, f"Several {what}s match; nothing changed. Reload and pick one.")
        if change.status == "refused":
            raise HTTPException(400, change.message or f"That {what} cannot be changed.")
        return change

    # -- the application ---------------------------------------------------------------------

    def _build(self) -> FastAPI:
        api = FastAPI(
            title="ovos-memory editor",
            summary="See, search, correct and wipe what an OpenVoiceOS persona remembers.",
            version="2",
            openapi_url="/api/openapi.json",
            docs_url=None,
            redoc_url=None,
        )

        @api.exception_handler(OvosMemoryPluginError)
        def _memory_error(request: Request, exc: OvosMemoryPluginError) -> JSONResponse:
            LOG.warning("memory editor: %s", exc)
            return JSONResponse({"detail": f"The memory refused: {exc}"}, status_code=400)

        @api.exception_handler(ValueError)
        def _value_error(request: Request, exc: ValueError) -> JSONResponse:
            return JSONResponse({"detail": f"The memory refused: {exc}"}, status_code=400)

        @api.exception_handler(RequestValidationError)
        def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
            text = _human_validation(exc)
            return JSONResponse({"detail": text[:1].upper() + text[1:] + "."}, status_code=422)

        # -- the page ------------------------------------------------------------------------

        @api.get("/", include_in_schema=False)
        def index() -> Response:
            return Response((STATIC / "index.html").read_bytes(), media_type="text/html; charset=utf-8")

        @api.get("/favicon.ico", include_in_schema=False)
        def favicon() -> Response:
            return Response((STATIC / "favicon.svg").read_bytes(), media_type="image/svg+xml")

        @api.get("/static/{name}", include_in_schema=False)
        def static(name: str) -> Response:
            types = {"js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8", "svg": "image/svg+xml"}
            ext = name.rsplit(".", 1)[-1]
            if "/" in name or "\\" in name or name.startswith(".") or ext not in types:
                raise HTTPException(404)
            path = STATIC / name
            if not path.is_file():
                raise HTTPException(404)
            return Response(path.read_bytes(), media_type=types[ext])

        # -- overview ------------------------------------------------------------------------

        @api.get("/api/info", tags=["memory"])
        def info() -> dict[str, Any]:
            """Whose memory this is, its figures and which views and verbs the page can offer."""
            stats: dict[str, Any] = {}
            stats_of = getattr(self.memory, "stats", None)
            if callable(stats_of):
                stats = stats_of()
            return {
                **self.whose(),
                "backend": type(self.memory).__name__,
                "stats": stats,
                "capabilities": self.parts.capabilities(),
            }

        # -- notes ---------------------------------------------------------------------------

        conflict: dict[int | str, dict[str, Any]] = {409: {"description": "the notes changed meanwhile"}}

        @api.get("/api/notes", tags=["notes"])
        def get_notes() -> dict[str, Any]:
            """The notes: ``items`` (active, then retired), ``version`` and, for one-text notes, ``body``."""
            return self.notes_state()

        @api.put("/api/notes", tags=["notes"], responses=conflict)
        def put_notes(edit: NotesBody) -> dict[str, Any]:
            """Replace the whole notes text; 409 when they changed since ``version``."""
            notes = self._notes()
            if not self.parts.capabilities()["notes_text"]:
                raise HTTPException(405, "These notes cannot be edited as one text; edit them one by one.")
            with self._lock:
                self._check_version(edit.version)
                try:
                    notes.replace_notes(edit.body, expected_version=edit.version)
                except OvosMemoryPluginError as exc:
                    raise HTTPException(409, f"The notes were not saved: {exc}. Reload and redo.") from exc
            return self.notes_state()

        @api.post("/api/notes/items", tags=["notes"])
        def add_note(note: NoteText) -> dict[str, Any]:
            """Add one note (``remember``; with ``session_id``/``date`` to put a deleted note back)."""
            notes = self._notes()
            change = notes.remember(note.text, session_id=note.session_id or "default", date=note.date)
            self._changed(change)
            return {**self.notes_state(), "status": change.status, "message": change.message}

        @api.put("/api/notes/items", tags=["notes"], responses=conflict)
        def update_note(edit: NoteEdit) -> dict[str, Any]:
            """Change one note's text (``update``); 409 when the notes changed since ``version``."""
            notes = self._notes()
            with self._lock:
                self._check_version(edit.version)
                self._changed(notes.update(edit.id, edit.text))
            return self.notes_state()

        @api.delete("/api/notes/items", tags=["notes"], responses=conflict)
        def forget_note(id: str = Query(min_length=1), version: str | None = None) -> dict[str, Any]:
            """Delete one note (``forget``); the answer's ``deleted`` is the note, to undo with ``POST``."""
            notes = self._notes()
            with self._lock:
                self._check_version(version)
                change = self._changed(notes.forget(id))
            compact(self.memory)
            deleted = _note(change.note) if change.note is not None else None
            return {**self.notes_state(), "deleted": deleted}

        @api.post("/api/notes/retire", tags=["notes"], responses=conflict)
        def retire_note(ref: NoteRef) -> dict[str, Any]:
            """Retire one note: kept, marked as no longer true, out of the prompt."""
            notes = self._notes()
            with self._lock:
                self._check_version(ref.version)
                self._changed(notes.retire(ref.id))
            return self.notes_state()

        @api.post("/api/notes/restore", tags=["notes"], responses=conflict)
        def restore_note(ref: NoteRef) -> dict[str, Any]:
            """Make a retired note active again (``restore``)."""
            notes = self._notes()
            with self._lock:
                self._check_version(ref.version)
                self._changed(notes.restore(ref.id), "retired note")
            return self.notes_state()

        @api.post("/api/notes/dream", tags=["notes"])
        def dream() -> dict[str, Any]:
            """Consolidate the notes now (``dream``): ``before``, ``after``, ``result`` and an ``undo`` id."""
            notes = self._notes()
            caps = self.parts.capabilities()
            if not caps["dream"]:
                raise HTTPException(405, "Dreaming needs a language model: set the notes memory's llm block.")
            with self._lock:
                before = str(notes.notes_body()) if caps["notes_text"] else ""
                result = notes.dream()
                after = str(notes.notes_body()) if caps["notes_text"] else ""
                undo_id = uuid.uuid4().hex
                changed = before != after
                if changed:
                    self._dreams[undo_id] = (before, self.notes_version())
            return {
                "before": before,
                "after": after,
                "changed": changed,
                "undo": undo_id if changed else None,
                "result": _jsonable(result),
                "notes": self.notes_state(),
            }

        @api.post("/api/notes/dream/undo", tags=["notes"], responses=conflict)
        def undo_dream(undo: Undo) -> dict[str, Any]:
            """Put back the notes as they were before a dream; 409 when they changed since."""
            notes = self._notes()
            with self._lock:
                record = self._dreams.get(undo.id)
                if record is None:
                    raise HTTPException(404, "That dream was already undone (or is from an earlier run).")
                before, after_version = record
                self._check_version(after_version)
                notes.replace_notes(before, expected_version=after_version)
                del self._dreams[undo.id]
            return self.notes_state()

        # -- the archive ---------------------------------------------------------------------

        @api.get("/api/search", tags=["archive"])
        def search(
            q: str = Query(min_length=1, max_length=4000),
            session: str | None = None,
            k: int = Query(20, ge=1, le=200),
        ) -> dict[str, Any]:
            """Search the archive the way recall does (``search``)."""
            hits = self._archive().search(q, session_id=session or None, top_k=k)
            return {"query": q, "hits": [_hit(h) for h in hits]}

        @api.get("/api/sessions", tags=["archive"])
        def sessions() -> dict[str, Any]:
            """The sessions with recorded history."""
            return {"sessions": [str(s) for s in self._archive().sessions()]}

        @api.get("/api/sessions/{session_id}", tags=["archive"])
        def conversation(session_id: str) -> dict[str, Any]:
            """A session's recorded conversation (oldest first) and, where listed, its documents."""
            archive = self._archive()
            out: dict[str, Any] = {"session": session_id, "messages": self._messages(session_id), "documents": None}
            if self.parts.capabilities()["archive_list"]:
                out["documents"] = [
                    _doc(d)
                    for d in iter_documents(archive)
                    if d.session_id == session_id and d.metadata.get("kind") != "note"
                ]
            return out

        @api.delete("/api/sessions/{session_id}", tags=["archive"])
        def forget_session(session_id: str, confirm: str = Query("")) -> dict[str, Any]:
            """Delete a session's documents and history (``forget_session``); ``confirm`` must repeat its id."""
            if confirm != session_id:
                raise HTTPException(400, "Confirm first: deleting a session cannot be undone.")
            n = self._archive().forget_session(session_id)
            return {"deleted": n, **_compacted(self.memory)}

        @api.delete("/api/documents/{doc_id}", tags=["archive"])
        def delete_document(doc_id: str) -> dict[str, Any]:
            """Delete one document (``delete``); ``document`` is what was deleted, to undo with ``POST``."""
            archive = self._archive()
            before = None
            if self.parts.capabilities()["archive_list"]:
                before = next((_doc(d) for d in iter_documents(archive) if d.id == doc_id), None)
            n = archive.delete([doc_id])
            if not n:
                raise HTTPException(404, "That memory is gone already (deleted meanwhile?).")
            return {"deleted": n, "document": before, **_compacted(self.memory)}

        @api.post("/api/documents", tags=["archive"])
        def put_document(doc: Document) -> dict[str, Any]:
            """Store a document under its id (``put_document``): the undo of a delete."""
            self._archive().put_document(doc.id, doc.text, doc.session_id, dict(doc.metadata))
            return {"stored": doc.id}

        @api.post("/api/forget-all", tags=["archive"])
        def forget_all(confirm: Confirm) -> dict[str, Any]:
            """Delete every document and all history (``forget_all``); ``confirm`` must be "everything"."""
            if confirm.confirm != "everything":
                raise HTTPException(400, "Nothing was deleted: type the word everything in the box to confirm.")
            n = self._archive().forget_all()
            return {"deleted": n, **_compacted(self.memory)}

        @api.get("/api/export", tags=["memory"])
        def export() -> JSONResponse:
            """Everything the editor can see, as one JSON download."""
            data: dict[str, Any] = {"exported": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            data.update(self.whose())
            data["backend"] = type(self.memory).__name__
            if self.parts.notes is not None:
                data["notes"] = self.notes_state()
            if self.parts.archive is not None:
                archive = self.parts.archive
                data["sessions"] = {s: self._messages(s) for s in archive.sessions()}
                if self.parts.capabilities()["archive_list"]:
                    data["documents"] = [_doc(d) for d in iter_documents(archive) if d.metadata.get("kind") != "note"]
            headers = {"content-disposition": 'attachment; filename="memory-export.json"'}
            return JSONResponse(data, headers=headers)

        return api

    # -- archive helpers ---------------------------------------------------------------------

    def _messages(self, session_id: str) -> list[dict[str, str]]:
        """A session's recorded messages, oldest first (``dated_messages``), each with ``when``
        it was recorded (``YYYY-MM-DD HH:MM``, local time; "" when unknown)."""
        messages = self._archive().dated_messages(session_id)
        return [
            {"role": str(getattr(m.role, "value", m.role)), "content": m.content, "when": stamp({"time": t})}
            for m, t in messages
        ]


def make_app(
    memory: Any, token: str | None = None, allowed_hosts: set[str] | None = None, title: str | None = None
) -> EditorApp:
    """The editor for ``memory``: an :class:`EditorApp` whose ``app`` attribute is the ASGI app.

    Args:
        memory: a memory plugin instance (any backend of this package, a composite, or a
            third-party ``BaseRetrievalMemory``).
        token: the per-run token (default: a fresh random one).
        allowed_hosts: accepted ``Host`` header values (``name:port``); :func:`serve` sets them.
        title: whose memory this is (a persona's name), shown as the page's title.
    """
    return EditorApp(memory, token=token, allowed_hosts=allowed_hosts, title=title)
