// The memory editor page. Plain JavaScript, no build step.
// Every remembered text is put on the page with textContent (never parsed as HTML), so a memory
// that looks like HTML or script is shown as the characters it is.
// Deleting one note or one memory can be undone for a few seconds (a bar at the bottom); deleting
// a session asks first; deleting everything needs the word "everything" typed.
"use strict";

(function () {
  const token = new URLSearchParams(location.hash.slice(1)).get("token") || "";
  const state = { caps: {}, notesVersion: null, undo: null, toastTimer: null, toastUndo: null };
  const UNDO_SECONDS = 10;

  const $ = (id) => document.getElementById(id);

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else if (k.startsWith("data-")) node.setAttribute(k, v);
      else node[k] = v;
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  function textNode(tag, text, cls) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    node.textContent = text;
    return node;
  }

  function banner(message, reload) {
    $("banner-text").textContent = message;
    $("banner-reload").hidden = !reload;
    $("banner").hidden = false;
    $("banner").scrollIntoView({ block: "nearest" });
  }

  function clearBanner() {
    $("banner").hidden = true;
  }

  // The bar at the bottom: what was just deleted, and a button that puts it back.
  function offerUndo(message, undo) {
    clearTimeout(state.toastTimer);
    $("toast-text").textContent = message;
    state.toastUndo = undo;
    $("toast-undo").hidden = !undo;
    $("toast").hidden = false;
    state.toastTimer = setTimeout(closeToast, UNDO_SECONDS * 1000);
  }

  function closeToast() {
    clearTimeout(state.toastTimer);
    state.toastUndo = null;
    $("toast").hidden = true;
  }

  class ApiError extends Error {
    constructor(status, detail) {
      super(detail);
      this.status = status;
    }
  }

  // What to tell a person when a request fails: the server's own sentence where it wrote one.
  function humanError(status, detail) {
    if (status === 0) {
      return "The memory editor is not answering. Is `ovos-memory serve` still running? Start it again and open the address it prints.";
    }
    if (status === 401 || status === 403) {
      return "This page is not allowed to change the memory: open the exact address `ovos-memory serve` printed (it carries a key).";
    }
    if (status >= 500 || !detail) {
      return "Something went wrong in the memory editor, so this change may not have been saved. The terminal running `ovos-memory serve` shows the details.";
    }
    return detail;
  }

  async function api(method, path, body) {
    const options = { method, headers: { "X-Editor-Token": token }, credentials: "omit", cache: "no-store" };
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, options);
    } catch (e) {
      throw new ApiError(0, "");
    }
    let data = null;
    try {
      data = await response.json();
    } catch (e) {
      data = null;
    }
    if (!response.ok) {
      const detail = data && typeof data.detail === "string" ? data.detail : "";
      throw new ApiError(response.status, humanError(response.status, detail));
    }
    return data;
  }

  // Runs an action; a failure is shown as one sentence, and a 409 offers to reload.
  async function act(action) {
    try {
      clearBanner();
      await action();
    } catch (err) {
      if (err instanceof ApiError && err.status === 409) {
        banner(err.message || "The notes changed since this page loaded them. Your change was not saved: reload, then redo it.", true);
      } else if (err instanceof ApiError) {
        banner(err.message, false);
        if (err.status === 404) refreshCurrent();
      } else {
        banner("Something went wrong on this page: " + String(err.message || err), false);
      }
    }
  }

  // A button that asks once more before doing something that cannot be undone.
  function confirmButton(label, question, action) {
    const button = el("button", { type: "button", className: "delete danger-button" }, label);
    button.addEventListener("click", () => {
      if (button.dataset.armed === "1") {
        button.dataset.armed = "";
        button.textContent = label;
        act(action);
        return;
      }
      button.dataset.armed = "1";
      button.textContent = question;
      setTimeout(() => { button.dataset.armed = ""; button.textContent = label; }, 5000);
    });
    return button;
  }

  // -- notes ---------------------------------------------------------------------------------

  function renderNotes(notes) {
    state.notesVersion = notes.version;
    const hasText = notes.body !== null && notes.body !== undefined;
    $("notes-raw").hidden = !hasText;
    if (hasText) $("notes-body").value = notes.body;
    const list = $("notes-list");
    list.replaceChildren();
    if (notes.items.length === 0) list.append(textNode("li", "No notes yet.", "empty"));
    for (const note of notes.items) list.append(noteItem(note));
    filterNotes();
  }

  // Hides the notes that do not contain every word typed in the filter box.
  function filterNotes() {
    const words = $("notes-q").value.toLowerCase().split(/\s+/).filter(Boolean);
    for (const li of $("notes-list").querySelectorAll("li.note")) {
      const node = li.querySelector(".text");
      if (!node) continue;
      const text = node.textContent.toLowerCase();
      li.hidden = !words.every((w) => text.includes(w));
    }
  }

  function noteItem(note) {
    const retired = note.status === "retired";
    const li = el("li", { class: retired ? "note retired" : "note", "data-id": note.id });
    li.append(textNode("span", note.text, "text"));
    const badges = el("span", { class: "badges" });
    if (note.date) badges.append(textNode("span", note.date, "badge"));
    if (note.session_id && note.session_id !== "default") badges.append(textNode("span", note.session_id, "badge"));
    if (retired) badges.append(textNode("span", note.retired_on ? `retired ${note.retired_on}` : "retired", "badge"));
    li.append(badges);
    const tools = el("span", { class: "tools" });
    const change = (method, path, body) => act(async () => renderNotes(await api(method, path, body)));
    if (!retired) {
      tools.append(el("button", { type: "button", className: "edit", onclick: () => editNote(li, note) }, "Edit"));
      tools.append(el("button", {
        type: "button", className: "retire", title: "Keep it, but as no longer true",
        onclick: () => change("POST", "/api/notes/retire", { id: note.id, version: state.notesVersion }),
      }, "Retire"));
    } else {
      tools.append(el("button", {
        type: "button", className: "restore",
        onclick: () => change("POST", "/api/notes/restore", { id: note.id, version: state.notesVersion }),
      }, "Restore"));
    }
    tools.append(el("button", {
      type: "button", className: "delete danger-button",
      onclick: () => act(() => deleteNote(note)),
    }, "Delete"));
    li.append(tools);
    return li;
  }

  async function deleteNote(note) {
    const query = new URLSearchParams({ id: note.id, version: state.notesVersion });
    const data = await api("DELETE", `/api/notes/items?${query}`);
    renderNotes(data);
    const gone = data.deleted || note;
    offerUndo(`Deleted the note "${shorten(gone.text)}".`, async () => {
      const back = { text: gone.text, session_id: gone.session_id || null, date: gone.date || null };
      renderNotes(await api("POST", "/api/notes/items", back));
    });
  }

  function shorten(text) {
    return text.length > 60 ? text.slice(0, 57) + "…" : text;
  }

  function editNote(li, note) {
    const input = el("input", { type: "text", className: "edit-text", value: note.text });
    const save = el("button", {
      type: "button", className: "save",
      onclick: () => act(async () => renderNotes(await api("PUT", "/api/notes/items",
        { id: note.id, text: input.value, version: state.notesVersion }))),
    }, "Save");
    const cancel = el("button", { type: "button", className: "cancel", onclick: () => loadNotes() }, "Cancel");
    li.replaceChildren(input, el("span", { class: "tools" }, save, cancel));
    input.focus();
  }

  async function loadNotes() {
    await act(async () => renderNotes(await api("GET", "/api/notes")));
  }

  // -- archive -------------------------------------------------------------------------------

  // What a delete's answer says when a file could not be compacted yet (busy): "" otherwise.
  function compactNote(data) {
    const waiting = Object.keys((data && data.not_compacted) || {});
    return waiting.length ? ` Not compacted yet: ${waiting.join(", ")} was busy; its free space is wiped at the next delete.` : "";
  }

  // Deletes one stored memory; where the memory can list what it stores, the bar offers undo,
  // elsewhere the button asks first.
  function documentDelete(docId, after) {
    const run = async () => {
      const data = await api("DELETE", `/api/documents/${encodeURIComponent(docId)}`);
      await after();
      await loadInfo();
      const doc = data.document;
      const said = doc ? `Deleted the memory "${shorten(doc.text)}".` : "Deleted the memory.";
      offerUndo(said + compactNote(data), doc ? async () => {
        await api("POST", "/api/documents", doc);
        await after();
        await loadInfo();
      } : null);
    };
    if (state.caps.archive_list) {
      return el("button", { type: "button", className: "delete danger-button", onclick: () => act(run) }, "Delete");
    }
    return confirmButton("Delete", "Delete for good?", run);
  }

  function renderHits(data) {
    const list = $("search-results");
    list.replaceChildren();
    if (data.hits.length === 0) list.append(textNode("li", "Nothing found.", "empty"));
    for (const hit of data.hits) {
      const li = el("li", { class: "hit", "data-id": hit.source });
      li.append(textNode("pre", hit.content, "text"));
      const session = hit.metadata && hit.metadata.session_id ? ` · session ${hit.metadata.session_id}` : "";
      const when = hit.when ? `${hit.when} · ` : "";
      const meta = textNode("span", `${when}${hit.source} · score ${Number(hit.score).toPrecision(3)}${session}`, "meta");
      if (state.caps.archive_delete) {
        li.append(el("span", { class: "tools" }, documentDelete(hit.source, rerunSearch)));
      }
      li.append(meta);
      list.append(li);
    }
  }

  async function rerunSearch() {
    const q = $("search-q").value.trim();
    if (!q) return;
    const params = new URLSearchParams({ q });
    const session = $("search-session").value.trim();
    if (session) params.set("session", session);
    renderHits(await api("GET", `/api/search?${params}`));
  }

  async function loadSessions() {
    const data = await api("GET", "/api/sessions");
    const list = $("sessions");
    list.replaceChildren();
    if (data.sessions.length === 0) list.append(textNode("li", "No recorded conversations.", "empty"));
    for (const sid of data.sessions) {
      const li = el("li", { class: "session", "data-id": sid }, textNode("span", sid, "text"));
      const tools = el("span", { class: "tools" });
      tools.append(el("button", { type: "button", className: "view", onclick: () => act(() => showSession(sid)) }, "View"));
      if (state.caps.archive_delete) {
        tools.append(confirmButton("Delete session", "Delete it for good?", async () => {
          const data = await api("DELETE", `/api/sessions/${encodeURIComponent(sid)}?${new URLSearchParams({ confirm: sid })}`);
          $("conversation").hidden = true;
          await loadSessions();
          await loadInfo();
          offerUndo(`Deleted the session "${shorten(sid)}".` + compactNote(data), null);
        }));
      }
      li.append(tools);
      list.append(li);
    }
  }

  async function showSession(sid) {
    const data = await api("GET", `/api/sessions/${encodeURIComponent(sid)}`);
    $("conversation-id").textContent = sid;
    const list = $("messages");
    list.replaceChildren();
    for (const m of data.messages) {
      const li = el("li", { class: `msg ${m.role}` }, textNode("span", m.role, "role"), textNode("pre", m.content, "text"));
      if (m.when) li.append(textNode("span", m.when, "meta"));  // when it was said (local time)
      list.append(li);
    }
    const docs = $("documents");
    docs.replaceChildren();
    $("documents-box").hidden = !data.documents;
    for (const doc of data.documents || []) {
      const li = el("li", { class: "doc", "data-id": doc.id }, textNode("pre", doc.text, "text"));
      if (state.caps.archive_delete) {
        li.append(el("span", { class: "tools" }, documentDelete(doc.id, () => showSession(sid))));
      }
      li.append(textNode("span", doc.when ? `${doc.when} · ${doc.id}` : doc.id, "meta"));
      docs.append(li);
    }
    $("conversation").hidden = false;
  }

  // -- overview ------------------------------------------------------------------------------

  async function loadInfo() {
    const info = await api("GET", "/api/info");
    state.caps = info.capabilities;
    const heading = info.title ? `${info.title}: what the persona remembers` : `Memory of ${info.label}`;
    $("title").textContent = heading;
    document.title = info.title ? `${info.title} — memory` : `${info.label} — memory`;
    const stats = info.stats || {};
    const figures = [];
    if (typeof stats.notes === "number") figures.push(`${stats.notes} notes`);
    if (typeof stats.documents === "number") figures.push(`${stats.documents} memories`);
    if (typeof stats.history_sessions === "number") figures.push(`${stats.history_sessions} sessions`);
    const where = info.where || info.root;
    if (where) figures.push(`kept in ${where}`);
    $("summary").textContent = figures.join(" · ");
    return info;
  }

  let current = null;

  function show(view) {
    current = view;
    for (const name of ["notes", "archive"]) {
      $(`view-${name}`).hidden = name !== view;
      $(`tab-${name}`).classList.toggle("active", name === view);
    }
    refreshCurrent();
  }

  function refreshCurrent() {
    if (current === "notes") loadNotes();
    if (current === "archive") act(loadSessions);
  }

  async function exportAll() {
    const data = await api("GET", "/api/export");
    const blob = new Blob([JSON.stringify(data, null, 2)], { type: "application/json" });
    const link = el("a", { href: URL.createObjectURL(blob), download: "memory-export.json" });
    document.body.append(link);
    link.click();
    link.remove();
  }

  function wire() {
    for (const button of document.querySelectorAll("#tabs button[data-view]")) {
      button.addEventListener("click", () => show(button.dataset.view));
    }
    $("export").addEventListener("click", () => act(exportAll));
    $("banner-close").addEventListener("click", clearBanner);
    $("banner-reload").addEventListener("click", () => { clearBanner(); loadNotes(); });
    $("toast-close").addEventListener("click", closeToast);
    $("toast-undo").addEventListener("click", () => {
      const undo = state.toastUndo;
      closeToast();
      if (undo) act(undo);
    });
    $("note-add-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const text = $("note-new").value.trim();
      if (!text) {
        banner("Type the note first, then press Add.", false);
        return;
      }
      act(async () => {
        renderNotes(await api("POST", "/api/notes/items", { text }));
        $("note-new").value = "";
      });
    });
    $("notes-save").addEventListener("click", () => act(async () => {
      const draft = $("notes-body").value;
      try {
        renderNotes(await api("PUT", "/api/notes", { body: draft, version: state.notesVersion }));
        $("notes-draft").hidden = true;
      } catch (err) {
        if (err instanceof ApiError && err.status === 409) {
          // keep what was typed where the user can copy it after reloading
          $("notes-draft-text").textContent = draft;
          $("notes-draft").hidden = false;
        }
        throw err;
      }
    }));
    $("dream").addEventListener("click", () => act(async () => {
      $("dream").disabled = true;
      $("dream-status").textContent = "Dreaming… (the language model is rewriting the notes)";
      $("dream-result").hidden = false;
      try {
        const data = await api("POST", "/api/notes/dream");
        $("dream-before").textContent = data.before;
        $("dream-after").textContent = data.after;
        const result = data.result || {};
        const why = result.reason ? ` (${result.reason})` : "";
        $("dream-status").textContent = data.changed
          ? "The notes were rewritten. Compare, and undo if you prefer the old ones."
          : `Nothing changed: ${result.status || "no result"}${why}.`;
        $("dream-undo").hidden = !data.undo;
        state.undo = data.undo;
        renderNotes(data.notes);
        $("dream-result").scrollIntoView({ block: "nearest" });
      } catch (err) {
        $("dream-result").hidden = true;
        throw err;
      } finally {
        $("dream").disabled = false;
      }
    }));
    $("dream-undo").addEventListener("click", () => act(async () => {
      renderNotes(await api("POST", "/api/notes/dream/undo", { id: state.undo }));
      $("dream-result").hidden = true;
    }));
    $("notes-q").addEventListener("input", filterNotes);
    $("search-form").addEventListener("submit", (e) => {
      e.preventDefault();
      if (!$("search-q").value.trim()) {
        banner("Type what to search for first.", false);
        return;
      }
      act(rerunSearch);
    });
    $("forget-all").addEventListener("click", () => {
      if ($("confirm-all").value.trim() !== "everything") {
        banner("Nothing was deleted: type the word everything in the box first, then press Delete everything.", false);
        $("confirm-all").focus();
        return;
      }
      act(async () => {
        const data = await api("POST", "/api/forget-all", { confirm: $("confirm-all").value.trim() });
        $("confirm-all").value = "";
        $("search-results").replaceChildren();
        $("conversation").hidden = true;
        await loadSessions();
        await loadInfo();
        offerUndo("Deleted every memory and all history." + compactNote(data), null);
      });
    });
  }

  async function start() {
    wire();
    await act(async () => {
      const info = await loadInfo();
      const caps = info.capabilities;
      $("tab-notes").hidden = !caps.notes;
      $("tab-archive").hidden = !caps.archive;
      $("dream-box").hidden = !caps.dream;
      show(caps.notes ? "notes" : "archive");
      document.body.dataset.ready = "1";
    });
  }

  document.addEventListener("DOMContentLoaded", start);
})();
