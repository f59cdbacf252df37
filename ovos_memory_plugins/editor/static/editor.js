// The memory editor page. Plain JavaScript, no build step.
// Every remembered text is put on the page with textContent (never parsed as HTML), so a memory
// that looks like HTML or script is shown as the characters it is.
"use strict";

(function () {
  const token = new URLSearchParams(location.hash.slice(1)).get("token") || "";
  const state = { caps: {}, notesVersion: null, undo: null };

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
  }

  function clearBanner() {
    $("banner").hidden = true;
  }

  class ApiError extends Error {
    constructor(status, detail) {
      super(detail);
      this.status = status;
    }
  }

  async function api(method, path, body) {
    const options = { method, headers: { "X-Editor-Token": token }, credentials: "omit", cache: "no-store" };
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    const response = await fetch(path, options);
    let data = null;
    try {
      data = await response.json();
    } catch (e) {
      data = null;
    }
    if (!response.ok) {
      let detail = data && data.detail !== undefined ? data.detail : response.statusText;
      if (typeof detail !== "string") detail = JSON.stringify(detail);
      throw new ApiError(response.status, detail);
    }
    return data;
  }

  // Runs an action; a 409 (the notes changed meanwhile) asks the user to reload.
  async function act(action) {
    try {
      clearBanner();
      await action();
    } catch (err) {
      if (err instanceof ApiError && err.status === 409) {
        banner("The notes changed since this page loaded them (the persona may have written to them). " +
          "Your change was not saved. Reload to see the current notes, then redo it.", true);
      } else if (err instanceof ApiError && err.status === 401) {
        banner("This page has no valid token: open the exact URL the server printed.", false);
      } else {
        banner(String(err.message || err), false);
      }
    }
  }

  // -- notes ---------------------------------------------------------------------------------

  function renderNotes(notes) {
    state.notesVersion = notes.version;
    $("notes-body").value = notes.body;
    const list = $("notes-list");
    list.replaceChildren();
    const items = notes.items;
    $("note-add-form").hidden = !state.caps.notes_remember;
    if (!items) {
      list.hidden = true;
      $("notes-raw").open = true;
      return;
    }
    list.hidden = false;
    if (items.length === 0) list.append(textNode("li", "No notes yet.", "empty"));
    for (const note of items) list.append(noteItem(note));
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
    if (note.date) li.append(textNode("span", note.date, "badge"));
    if (retired) li.append(textNode("span", note.retired_on ? `retired ${note.retired_on}` : "retired", "badge"));
    const tools = el("span", { class: "tools" });
    const change = (method, path, body) => act(async () => renderNotes(await api(method, path, body)));
    if (!retired && state.caps.notes_update) {
      tools.append(el("button", { type: "button", className: "edit", onclick: () => editNote(li, note) }, "Edit"));
    }
    if (!retired && state.caps.notes_retire) {
      tools.append(el("button", {
        type: "button", className: "retire",
        onclick: () => change("POST", "/api/notes/retire", { id: note.id, version: state.notesVersion }),
      }, "Retire"));
    }
    if (retired && state.caps.notes_restore) {
      tools.append(el("button", {
        type: "button", className: "restore",
        onclick: () => change("POST", "/api/notes/restore", { id: note.id, version: state.notesVersion }),
      }, "Restore"));
    }
    if (!retired && state.caps.notes_forget) {
      const query = new URLSearchParams({ id: note.id, version: state.notesVersion });
      tools.append(el("button", {
        type: "button", className: "delete danger-button",
        onclick: () => change("DELETE", `/api/notes/items?${query}`),
      }, "Delete"));
    }
    li.append(tools);
    return li;
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

  // -- sticky notes --------------------------------------------------------------------------

  function renderSticky(data) {
    const list = $("sticky-list");
    list.replaceChildren();
    if (data.items.length === 0) list.append(textNode("li", "No sticky notes.", "empty"));
    for (const note of data.items) {
      const li = el("li", { class: "note", "data-id": note.id }, textNode("span", note.text, "text"));
      if (note.session_id) li.append(textNode("span", note.session_id, "badge"));
      li.append(el("span", { class: "tools" },
        el("button", { type: "button", className: "edit", onclick: () => editSticky(li, note) }, "Edit"),
        el("button", {
          type: "button", className: "delete danger-button",
          onclick: () => act(async () => {
            await api("DELETE", `/api/sticky/${encodeURIComponent(note.id)}`);
            await loadSticky();
          }),
        }, "Delete")));
      list.append(li);
    }
  }

  function editSticky(li, note) {
    const input = el("input", { type: "text", className: "edit-text", value: note.text });
    const save = el("button", {
      type: "button", className: "save",
      onclick: () => act(async () => {
        await api("PUT", `/api/sticky/${encodeURIComponent(note.id)}`, { text: input.value, old_text: note.text });
        await loadSticky();
      }),
    }, "Save");
    const cancel = el("button", { type: "button", className: "cancel", onclick: () => act(loadSticky) }, "Cancel");
    li.replaceChildren(input, el("span", { class: "tools" }, save, cancel));
    input.focus();
  }

  async function loadSticky() {
    const q = $("sticky-q").value.trim();
    renderSticky(await api("GET", q ? `/api/sticky?${new URLSearchParams({ q })}` : "/api/sticky"));
  }

  // -- archive -------------------------------------------------------------------------------

  function renderHits(data) {
    const list = $("search-results");
    list.replaceChildren();
    if (data.hits.length === 0) list.append(textNode("li", "Nothing found.", "empty"));
    for (const hit of data.hits) {
      const li = el("li", { class: "hit", "data-id": hit.source });
      li.append(textNode("pre", hit.content, "text"));
      const session = hit.metadata && hit.metadata.session_id ? ` · session ${hit.metadata.session_id}` : "";
      const meta = textNode("span", `${hit.source} · score ${Number(hit.score).toPrecision(3)}${session}`, "meta");
      if (state.caps.archive_delete) {
        li.append(el("span", { class: "tools" }, el("button", {
          type: "button", className: "delete danger-button",
          onclick: () => act(async () => {
            await api("DELETE", `/api/documents/${encodeURIComponent(hit.source)}`);
            li.remove();
            await loadInfo();
          }),
        }, "Delete")));
      }
      li.append(meta);
      list.append(li);
    }
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
        tools.append(el("button", {
          type: "button", className: "delete danger-button",
          onclick: () => act(async () => {
            await api("DELETE", `/api/sessions/${encodeURIComponent(sid)}`);
            $("conversation").hidden = true;
            await loadSessions();
            await loadInfo();
          }),
        }, "Delete session"));
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
      list.append(el("li", { class: `msg ${m.role}` }, textNode("span", m.role, "role"), textNode("pre", m.content, "text")));
    }
    const docs = $("documents");
    docs.replaceChildren();
    $("documents-box").hidden = !data.documents;
    for (const doc of data.documents || []) {
      const li = el("li", { class: "doc", "data-id": doc.id }, textNode("pre", doc.text, "text"));
      if (state.caps.archive_delete) {
        li.append(el("span", { class: "tools" }, el("button", {
          type: "button", className: "delete danger-button",
          onclick: () => act(async () => {
            await api("DELETE", `/api/documents/${encodeURIComponent(doc.id)}`);
            await showSession(sid);
            await loadInfo();
          }),
        }, "Delete")));
      }
      li.append(textNode("span", doc.id, "meta"));
      docs.append(li);
    }
    $("conversation").hidden = false;
  }

  // -- overview ------------------------------------------------------------------------------

  async function loadInfo() {
    const info = await api("GET", "/api/info");
    state.caps = info.capabilities;
    const shown = ["notes", "retired_notes", "documents", "history_sessions", "history_messages", "root"];
    const stats = info.stats || {};
    const figures = shown.filter((k) => typeof stats[k] === "number" || typeof stats[k] === "string")
      .map((k) => `${k.replace(/_/g, " ")}: ${stats[k]}`);
    $("summary").textContent = `${info.backend}${figures.length ? " — " + figures.join(" · ") : ""}`;
    return info;
  }

  function show(view) {
    for (const name of ["notes", "sticky", "archive"]) {
      $(`view-${name}`).hidden = name !== view;
      $(`tab-${name}`).classList.toggle("active", name === view);
    }
    if (view === "notes") loadNotes();
    if (view === "sticky") act(loadSticky);
    if (view === "archive") act(loadSessions);
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
    $("note-add-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const text = $("note-new").value.trim();
      if (!text) return;
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
      try {
        const data = await api("POST", "/api/notes/dream");
        $("dream-before").textContent = data.before;
        $("dream-after").textContent = data.after;
        const result = data.result || {};
        const why = result.reason ? ` (${result.reason})` : "";
        $("dream-status").textContent = data.changed
          ? "The notes were rewritten. Compare, and undo if you prefer the old ones."
          : `Nothing changed: ${result.status || "no result"}${why}.`;
        $("dream-result").hidden = false;
        $("dream-undo").hidden = !data.undo;
        state.undo = data.undo;
        renderNotes(data.notes);
      } finally {
        $("dream").disabled = false;
      }
    }));
    $("dream-undo").addEventListener("click", () => act(async () => {
      renderNotes(await api("POST", "/api/notes/dream/undo", { id: state.undo }));
      $("dream-result").hidden = true;
    }));
    $("sticky-add-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const text = $("sticky-new").value.trim();
      if (!text) return;
      act(async () => {
        renderSticky(await api("POST", "/api/sticky", { text }));
        $("sticky-new").value = "";
      });
    });
    $("sticky-search-form").addEventListener("submit", (e) => {
      e.preventDefault();
      act(loadSticky);
    });
    $("notes-q").addEventListener("input", filterNotes);
    $("search-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const q = $("search-q").value.trim();
      if (!q) return;
      const params = new URLSearchParams({ q });
      const session = $("search-session").value.trim();
      if (session) params.set("session", session);
      act(async () => renderHits(await api("GET", `/api/search?${params}`)));
    });
    $("forget-all").addEventListener("click", () => act(async () => {
      await api("POST", "/api/forget-all", { confirm: $("confirm-all").value.trim() });
      $("confirm-all").value = "";
      $("search-results").replaceChildren();
      $("conversation").hidden = true;
      await loadSessions();
      await loadInfo();
    }));
  }

  async function start() {
    wire();
    await act(async () => {
      const info = await loadInfo();
      const caps = info.capabilities;
      $("tab-notes").hidden = !caps.notes;
      $("tab-sticky").hidden = !caps.sticky;
      $("tab-archive").hidden = !caps.archive;
      $("dream-box").hidden = !caps.dream;
      const first = caps.notes ? "notes" : caps.sticky ? "sticky" : "archive";
      show(first);
      document.body.dataset.ready = "1";
    });
  }

  document.addEventListener("DOMContentLoaded", start);
})();
