"""The editor's web application: a JSON API under ``/api`` and one static page.

Built on FastAPI (which also serves the OpenAPI document at ``/api/openapi.json``). Every route
is a plain function: FastAPI runs it in a worker thread, and the memory's own lock makes the
calls safe next to a persona using the same instance.

Edits are never lost silently: ``GET /api/notes`` returns a ``version`` (a digest of the notes
text the page shows) and every change sends it back; when the notes changed in between (the
persona wrote to the same file), the change is refused with 409 and the page asks to reload.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from importlib import resources
from typing import Any

from fastapi import FastAPI, HTTPException, Query
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from ovos_memory_plugins.editor.parts import Parts, find_parts, scrub, version_of
from ovos_memory_plugins.editor.security import GuardMiddleware, new_token
from ovos_memory_plugins.errors import OvosMemoryPluginError
from ovos_memory_plugins.transfer import ExportedDocument, iter_documents

LOG = logging.getLogger(__name__)

__all__ = ["EditorApp", "make_app"]

STATIC = resources.files("ovos_memory_plugins.editor") / "static"


# -- request bodies ----------------------------------------------------------------------------


class NotesBody(BaseModel):
    """A whole-notes replacement: the new text and the version the page loaded."""

    body: str
    version: str = Field(description="the `version` of the notes the edit was made on")


class NoteText(BaseModel):
    """A note to add."""

    text: str = Field(min_length=1)


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


class StickyEdit(BaseModel):
    """The new text of a sticky note and the text the page showed (to detect a change meanwhile)."""

    text: str = Field(min_length=1)
    old_text: str | None = None


class Confirm(BaseModel):
    """Confirmation for deleting everything: ``confirm`` must be ``"everything"``."""

    confirm: str


class Undo(BaseModel):
    """Which dream to undo."""

    id: str


# -- helpers -----------------------------------------------------------------------------------


def _hit(hit: Any) -> dict[str, Any]:
    return {"content": hit.content, "source": hit.source, "score": hit.score, "metadata": dict(hit.metadata)}


def _jsonable(value: Any) -> Any:
    """A verb's result as JSON: dataclasses as dicts, other objects as text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return json.loads(json.dumps(dataclasses.asdict(value), default=str))
    if isinstance(value, (str, int, float, bool, type(None), list, dict)):
        return value
    return str(value)


def _doc(doc: ExportedDocument) -> dict[str, Any]:
    return {"id": doc.id, "text": doc.text, "session_id": doc.session_id, "metadata": doc.metadata}


def _note(note: Any) -> dict[str, Any]:
    """A note from a notes store as JSON: a string, a mapping, or an object with attributes."""
    if isinstance(note, str):
        return {"id": note, "text": note, "status": "active"}
    if isinstance(note, dict):
        data = dict(note)
    elif hasattr(note, "__dict__"):
        data = {k: v for k, v in vars(note).items() if not k.startswith("_")}
    else:
        data = {"text": str(note)}
    text = data.get("text", data.get("content", ""))
    data["text"] = text
    data["id"] = str(data.get("id", data.get("note_id", text)))
    retired = bool(data.get("retired")) or data.get("retired_on") is not None
    data.setdefault("status", "retired" if retired else "active")
    return {k: v if isinstance(v, (str, int, float, bool, type(None), list, dict)) else str(v) for k, v in data.items()}


class EditorApp:
    """The application and its state: the memory, its parts, the token, undo records.

    Attributes:
        app: the ASGI application to serve (the FastAPI app wrapped in the guard).
        api: the FastAPI application itself.
        guard: the :class:`GuardMiddleware`; set its allowed hosts once the port is known.
        token: the per-run token.
    """

    def __init__(self, memory: Any, token: str | None = None, allowed_hosts: set[str] | None = None) -> None:
        self.memory = memory
        self.parts: Parts = find_parts(memory)
        self.token = token or new_token()
        self._dreams: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()
        self.api = self._build()
        self.guard = GuardMiddleware(self.api, self.token, allowed_hosts or set())
        self.app = self.guard

    # -- state -------------------------------------------------------------------------------

    def _notes(self) -> Any:
        if self.parts.notes is None:
            raise HTTPException(404, "this memory keeps no notes")
        return self.parts.notes

    def _sticky(self) -> Any:
        if self.parts.sticky is None:
            raise HTTPException(404, "this memory keeps no sticky notes")
        return self.parts.sticky

    def _archive(self) -> Any:
        if self.parts.archive is None:
            raise HTTPException(404, "this memory keeps no archive")
        return self.parts.archive

    def notes_state(self) -> dict[str, Any]:
        """The notes as the page shows them: ``body`` (the text), its ``version``, and ``items``
        (active notes, then retired ones) where the backend lists them."""
        notes = self._notes()
        body = str(notes.notes_body())
        out: dict[str, Any] = {"body": body, "version": version_of(body), "items": None}
        if callable(getattr(notes, "notes", None)):
            items = [_note(n) for n in notes.notes()]
            if callable(getattr(notes, "retired_notes", None)):
                items += [_note(n) for n in notes.retired_notes()]
            out["items"] = items
        return out

    def sticky_state(self, q: str | None = None) -> dict[str, Any]:
        """The sticky notes, oldest first; with ``q``, the ones matching it, best first."""
        sticky = self._sticky()
        items = [_note(n) for n in sticky.notes()]
        if q and q.strip():
            order = [h.source for h in sticky.search(q, top_k=max(len(items), 1))]
            by_id = {n["id"]: n for n in items}
            items = [by_id[i] for i in order if i in by_id]
        return {"items": items}

    @contextlib.contextmanager
    def notes_guard(self) -> Iterator[None]:
        """Hold the notes still across a check and a write.

        Takes the editor's lock and, where the notes memory has them, its own mutex and its
        store's transaction (an advisory lock on ``MEMORY.md``, ``BEGIN IMMEDIATE`` on SQLite),
        in the order the memory's own verbs take them, so a persona in another process cannot
        write between the version check and the edit.
        """
        notes = self._notes()
        with contextlib.ExitStack() as stack:
            stack.enter_context(self._lock)
            mutex = getattr(notes, "_mutex", None)
            if mutex is not None and hasattr(mutex, "__enter__"):
                stack.enter_context(mutex)
            store = getattr(notes, "_notes_store", None)
            transaction = getattr(store, "transaction", None)
            if callable(transaction):
                stack.enter_context(transaction())
            yield

    def _check_version(self, version: str | None) -> None:
        """409 when the notes changed since the page loaded ``version``."""
        if version is None:
            return
        current = version_of(str(self._notes().notes_body()))
        if current != version:
            raise HTTPException(
                409, "the notes changed since this page loaded them (the persona wrote to them); reload and redo"
            )

    @staticmethod
    def _changed(change: Any, what: str) -> None:
        """Turn a verb's result into an HTTP answer: 404 not found, 409 ambiguous, else pass."""
        status = getattr(change, "status", None)
        if change is False or change == 0 or status == "not_found":
            raise HTTPException(404, f"no {what} matches")
        if status == "ambiguous":
            raise HTTPException(409, f"several {what}s match; nothing changed")

    def _retire(self, notes: Any, note_id: str) -> None:
        """Retire one active note: the backend's ``retire`` verb, else its store's ``retire``."""
        retire = getattr(notes, "retire", None)
        if callable(retire):
            self._changed(retire(note_id), "note")
            return
        store = getattr(notes, "_notes_store", None)
        if store is None or not callable(getattr(store, "retire", None)):
            raise HTTPException(405, "this notes store cannot retire notes")
        active = [n for n in notes.notes() if getattr(n, "text", None) == note_id]
        if not active:
            raise HTTPException(404, "no note matches")
        store.retire(active, time.strftime("%Y-%m-%d"))

    # -- the application ---------------------------------------------------------------------

    def _build(self) -> FastAPI:
        api = FastAPI(
            title="ovos-memory editor",
            summary="See, search, correct and wipe what an OpenVoiceOS persona remembers.",
            version="1",
            openapi_url="/api/openapi.json",
            docs_url=None,
            redoc_url=None,
        )

        @api.exception_handler(OvosMemoryPluginError)
        def _memory_error(request: Any, exc: OvosMemoryPluginError) -> JSONResponse:
            return JSONResponse({"detail": str(exc)}, status_code=400)

        @api.exception_handler(ValueError)
        def _value_error(request: Any, exc: ValueError) -> JSONResponse:
            return JSONResponse({"detail": str(exc)}, status_code=400)

        # -- the page ------------------------------------------------------------------------

        @api.get("/", include_in_schema=False)
        def index() -> Response:
            return Response((STATIC / "index.html").read_bytes(), media_type="text/html; charset=utf-8")

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
            """The memory's backend, its figures and which views the page can offer."""
            stats: dict[str, Any] = {}
            stats_of = getattr(self.memory, "stats", None)
            if callable(stats_of):
                stats = stats_of()
            return {"backend": type(self.memory).__name__, "stats": stats, "capabilities": self.parts.capabilities()}

        # -- notes ---------------------------------------------------------------------------

        conflict: dict[int | str, dict[str, Any]] = {409: {"description": "the notes changed meanwhile"}}

        @api.get("/api/notes", tags=["notes"])
        def get_notes() -> dict[str, Any]:
            """The notes: ``body`` (the text), ``version``, and ``items`` (active, then retired)."""
            return self.notes_state()

        @api.put("/api/notes", tags=["notes"], responses=conflict)
        def put_notes(edit: NotesBody) -> dict[str, Any]:
            """Replace the whole notes text (``replace_notes``); 409 when they changed since ``version``."""
            notes = self._notes()
            with self.notes_guard():
                self._check_version(edit.version)
                notes.replace_notes(edit.body)
            return self.notes_state()

        @api.post("/api/notes/items", tags=["notes"])
        def add_note(note: NoteText) -> dict[str, Any]:
            """Add one note (``remember``)."""
            notes = self._notes()
            if not callable(getattr(notes, "remember", None)):
                raise HTTPException(405, "this notes store cannot add single notes")
            notes.remember(note.text)
            return self.notes_state()

        @api.put("/api/notes/items", tags=["notes"], responses=conflict)
        def update_note(edit: NoteEdit) -> dict[str, Any]:
            """Change one note's text (``update``: the old text is retired); 409 when the notes changed."""
            notes = self._notes()
            if not callable(getattr(notes, "update", None)):
                raise HTTPException(405, "this notes store cannot edit single notes")
            with self.notes_guard():
                self._check_version(edit.version)
                self._changed(notes.update(edit.id, edit.text), "note")
            return self.notes_state()

        @api.delete("/api/notes/items", tags=["notes"], responses=conflict)
        def forget_note(id: str = Query(min_length=1), version: str | None = None) -> dict[str, Any]:
            """Delete one active note (``forget``); 409 when the notes changed since ``version``."""
            notes = self._notes()
            with self.notes_guard():
                self._check_version(version)
                self._changed(notes.forget(id), "note")
            scrub(notes)
            return self.notes_state()

        @api.post("/api/notes/retire", tags=["notes"], responses=conflict)
        def retire_note(ref: NoteRef) -> dict[str, Any]:
            """Retire one note: kept, marked as no longer true, out of the prompt."""
            notes = self._notes()
            with self.notes_guard():
                self._check_version(ref.version)
                self._retire(notes, ref.id)
            return self.notes_state()

        @api.post("/api/notes/restore", tags=["notes"], responses=conflict)
        def restore_note(ref: NoteRef) -> dict[str, Any]:
            """Make a retired note active again (``restore``)."""
            notes = self._notes()
            if not callable(getattr(notes, "restore", None)):
                raise HTTPException(405, "this notes store cannot restore notes")
            with self.notes_guard():
                self._check_version(ref.version)
                self._changed(notes.restore(ref.id), "retired note")
            return self.notes_state()

        @api.post("/api/notes/dream", tags=["notes"])
        def dream() -> dict[str, Any]:
            """Consolidate the notes now (``dream``): ``before``, ``after``, ``result`` and an ``undo`` id."""
            notes = self._notes()
            if not callable(getattr(notes, "dream", None)):
                raise HTTPException(405, "this memory cannot dream")
            with self._lock:
                before = str(notes.notes_body())
                result = notes.dream()
                after = str(notes.notes_body())
                undo_id = uuid.uuid4().hex
                if before != after:
                    self._dreams[undo_id] = (before, version_of(after))
            return {
                "before": before,
                "after": after,
                "changed": before != after,
                "undo": undo_id if before != after else None,
                "result": _jsonable(result),
                "notes": self.notes_state(),
            }

        @api.post("/api/notes/dream/undo", tags=["notes"], responses=conflict)
        def undo_dream(undo: Undo) -> dict[str, Any]:
            """Put back the notes as they were before a dream; 409 when they changed since."""
            notes = self._notes()
            with self.notes_guard():
                record = self._dreams.get(undo.id)
                if record is None:
                    raise HTTPException(404, "unknown dream (already undone, or from another run)")
                before, after_version = record
                self._check_version(after_version)
                notes.replace_notes(before)
                del self._dreams[undo.id]
            return self.notes_state()

        # -- sticky notes --------------------------------------------------------------------

        @api.get("/api/sticky", tags=["sticky"])
        def get_sticky(q: str | None = Query(None, max_length=4000)) -> dict[str, Any]:
            """The sticky notes, oldest first; with ``q``, the ones matching it, best first."""
            return self.sticky_state(q)

        @api.post("/api/sticky", tags=["sticky"])
        def add_sticky(note: NoteText) -> dict[str, Any]:
            """Add a sticky note (``remember``)."""
            self._sticky().remember(note.text)
            return self.sticky_state()

        @api.put("/api/sticky/{note_id}", tags=["sticky"], responses={409: {"description": "changed meanwhile"}})
        def edit_sticky(note_id: str, note: StickyEdit) -> dict[str, Any]:
            """Change a sticky note's text (kept in its session); 409 when it changed since the page loaded it."""
            sticky = self._sticky()
            with self._lock:
                current = next((n for n in sticky.notes() if str(getattr(n, "id", "")) == note_id), None)
                if current is None:
                    raise HTTPException(409, "this sticky note is gone (deleted meanwhile); reload")
                if note.old_text is not None and current.text != note.old_text:
                    raise HTTPException(409, "this sticky note changed since the page loaded it; reload")
                session = str(getattr(current, "session_id", "default"))
                new_id = sticky.remember(note.text, session_id=session)
                if new_id != note_id:
                    sticky.delete([note_id])
            scrub(sticky)
            return self.sticky_state()

        @api.delete("/api/sticky/{note_id}", tags=["sticky"])
        def forget_sticky(note_id: str) -> dict[str, Any]:
            """Delete a sticky note by id (``delete``)."""
            if not self._sticky().delete([note_id]):
                raise HTTPException(404, f"no sticky note {note_id!r}")
            scrub(self._sticky())
            return self.sticky_state()

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
            return {"sessions": self._sessions()}

        @api.get("/api/sessions/{session_id}", tags=["archive"])
        def conversation(session_id: str) -> dict[str, Any]:
            """A session's recorded conversation (oldest first) and, where listed, its documents."""
            archive = self._archive()
            out: dict[str, Any] = {"session": session_id, "messages": self._messages(session_id), "documents": None}
            if self.parts.capabilities()["archive_list"]:
                out["documents"] = [_doc(d) for d in iter_documents(archive) if d.session_id == session_id]
            return out

        @api.delete("/api/sessions/{session_id}", tags=["archive"])
        def forget_session(session_id: str) -> dict[str, Any]:
            """Delete a session's documents and history (``forget_session``)."""
            n = self._archive().forget_session(session_id)
            return {"deleted": n, "compacted": scrub(self.memory)}

        @api.delete("/api/documents/{doc_id}", tags=["archive"])
        def delete_document(doc_id: str) -> dict[str, Any]:
            """Delete one document (``delete``); 404 when there was none."""
            n = self._archive().delete([doc_id])
            if not n:
                raise HTTPException(404, f"no document {doc_id!r}")
            return {"deleted": n, "compacted": scrub(self.memory)}

        @api.post("/api/forget-all", tags=["archive"])
        def forget_all(confirm: Confirm) -> dict[str, Any]:
            """Delete every document and all history (``forget_all``); ``confirm`` must be "everything"."""
            if confirm.confirm != "everything":
                raise HTTPException(400, 'send {"confirm": "everything"} to delete everything')
            n = self._archive().forget_all()
            return {"deleted": n, "compacted": scrub(self.memory)}

        @api.get("/api/export", tags=["memory"])
        def export() -> JSONResponse:
            """Everything the editor can see, as one JSON download."""
            data: dict[str, Any] = {"exported": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            data["backend"] = type(self.memory).__name__
            if self.parts.notes is not None:
                data["notes"] = self.notes_state()
            if self.parts.sticky is not None:
                data["sticky"] = [_note(n) for n in self.parts.sticky.notes()]
            if self.parts.archive is not None:
                archive = self.parts.archive
                data["sessions"] = {s: self._messages(s) for s in self._sessions()}
                if self.parts.capabilities()["archive_list"]:
                    data["documents"] = [_doc(d) for d in iter_documents(archive)]
            headers = {"content-disposition": 'attachment; filename="memory-export.json"'}
            return JSONResponse(data, headers=headers)

        return api

    # -- archive helpers ---------------------------------------------------------------------

    def _sessions(self) -> list[str]:
        """The archive's sessions (``BaseRetrievalMemory.sessions``; a composite's primary's)."""
        archive = self._archive()
        if callable(getattr(archive, "sessions", None)):
            return [str(s) for s in archive.sessions()]
        return []

    def _messages(self, session_id: str) -> list[dict[str, str]]:
        """A session's recorded messages: every kept one where the archive lists them, else its
        history window."""
        archive = self._archive()
        listed = archive.messages(session_id) if callable(getattr(archive, "messages", None)) else None
        messages = listed if listed is not None else archive.get_history(session_id)
        return [{"role": str(getattr(m.role, "value", m.role)), "content": m.content} for m in messages]


def make_app(memory: Any, token: str | None = None, allowed_hosts: set[str] | None = None) -> EditorApp:
    """The editor for ``memory``: an :class:`EditorApp` whose ``app`` attribute is the ASGI app.

    Args:
        memory: a memory plugin instance (any backend of this package, a composite, or a
            third-party ``BaseRetrievalMemory``).
        token: the per-run token (default: a fresh random one).
        allowed_hosts: accepted ``Host`` header values (``name:port``); :func:`serve` sets them.
    """
    return EditorApp(memory, token=token, allowed_hosts=allowed_hosts)
