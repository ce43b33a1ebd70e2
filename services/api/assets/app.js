// The mneme dashboard: plain JavaScript over the api's REST endpoints and live stream.
// No build step and nothing fetched from the network beyond this api.
"use strict";

const $ = (selector) => document.querySelector(selector);
const state = { token: localStorage.getItem("mneme-token") || "", sessionsOffset: 0, source: null };

function escapeHtml(text) {
  return String(text ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

// Wrap every occurrence of the query's words in <mark>, after escaping, so nothing a memory
// contains can become markup.
function highlight(text, query) {
  const safe = escapeHtml(text);
  const words = (query || "").toLowerCase().split(/[^\p{L}\p{N}_]+/u).filter((w) => w.length > 1);
  if (!words.length) return safe;
  const pattern = new RegExp("(" + words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|") + ")", "giu");
  return safe.replace(pattern, "<mark>$1</mark>");
}

function when(ms) {
  if (!ms) return "";
  return new Date(ms).toLocaleString();
}

function kindBadge(kind) {
  return `<span class="kind ${escapeHtml(kind)}">${escapeHtml(kind)}</span>`;
}

async function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {});
  if (state.token) headers["authorization"] = "Bearer " + state.token;
  const response = await fetch(path, Object.assign({}, options, { headers }));
  const body = await response.json().catch(() => ({}));
  if (response.status === 401) {
    $("#token-bar").hidden = false;
  }
  if (!response.ok) {
    const message = body.error ? `${body.error.code}: ${body.error.message}` : `HTTP ${response.status}`;
    throw new Error(message);
  }
  return body;
}

// Live feed ------------------------------------------------------------------------------

function feedItem(name, data) {
  const li = document.createElement("li");
  li.className = "feed-item";
  li.dataset.kind = name;
  const label = name === "observation" ? data.kind : name;
  const title = data.title || data.tool_name || data.kind || "";
  const session = data.session_id
    ? ` <a href="#/session/${encodeURIComponent(data.session_id)}">${escapeHtml(data.session_id)}</a>`
    : "";
  li.innerHTML = `${kindBadge(label)}${escapeHtml(title)}<span class="when">${when(data.occurred_at_ms || data.last_seen_at_ms || Date.now())}</span>${session}`;
  const feed = $("#feed");
  feed.prepend(li);
  while (feed.children.length > 200) feed.lastChild.remove();
}

function connectStream() {
  if (state.source) state.source.close();
  const url = "/v1/stream" + (state.token ? "?access_token=" + encodeURIComponent(state.token) : "");
  const source = new EventSource(url);
  state.source = source;
  source.addEventListener("ready", () => {
    $("#status").textContent = "live";
    $("#status").classList.add("live");
  });
  for (const name of ["observation", "structured", "summary", "checkpoint", "pattern"]) {
    source.addEventListener(name, (event) => {
      try {
        feedItem(name, JSON.parse(event.data));
      } catch (_) { /* a malformed event is skipped, the stream goes on */ }
    });
  }
  source.onerror = () => {
    $("#status").textContent = "reconnecting";
    $("#status").classList.remove("live");
  };
}

// Search -----------------------------------------------------------------------------------

async function runSearch(params) {
  const q = params.get("q") || "";
  for (const key of ["q", "kind", "project", "file", "concept", "mode"]) {
    const input = document.getElementById(key);
    if (input) input.value = params.get(key) || (key === "mode" ? "hybrid" : "");
  }
  const results = $("#results");
  results.innerHTML = "";
  if (!q) {
    $("#search-info").textContent = "";
    return;
  }
  $("#search-info").textContent = "searching…";
  try {
    const query = new URLSearchParams();
    for (const [key, value] of params) if (value) query.set(key, value);
    const found = await api("/v1/search?" + query.toString());
    $("#search-info").textContent = `${found.hits.length} results (${found.mode})`;
    if (!found.hits.length) results.innerHTML = `<li class="empty">Nothing found.</li>`;
    for (const hit of found.hits) {
      const li = document.createElement("li");
      li.className = "result";
      li.innerHTML = `${kindBadge(hit.kind)}<a class="title" href="#/session/${encodeURIComponent(hit.session_id)}">${highlight(hit.title, q)}</a>
        <span class="when">${when(hit.occurred_at_ms)} · relevance ${hit.relevance.toFixed(2)}</span>
        <div class="snippet">${highlight(hit.snippet, q)}</div>`;
      results.append(li);
    }
  } catch (error) {
    $("#search-info").textContent = error.message;
  }
}

// Sessions ---------------------------------------------------------------------------------

async function loadSessions(reset) {
  if (reset) {
    state.sessionsOffset = 0;
    $("#sessions").innerHTML = "";
  }
  try {
    const page = await api(`/v1/sessions?limit=50&offset=${state.sessionsOffset}`);
    state.sessionsOffset += page.sessions.length;
    for (const s of page.sessions) {
      const li = document.createElement("li");
      li.className = "session";
      li.innerHTML = `<a href="#/session/${encodeURIComponent(s.id)}">${escapeHtml(s.title || s.id)}</a>
        <div class="hint">${escapeHtml(s.project)} · ${escapeHtml(s.agent)} · ${s.events} events, ${s.errors} errors<br>${when(s.last_event_at_ms)}</div>`;
      $("#sessions").append(li);
    }
    if (!page.total) $("#sessions").innerHTML = `<li class="empty">No sessions yet.</li>`;
    $("#more-sessions").hidden = state.sessionsOffset >= page.total;
  } catch (error) {
    $("#sessions").innerHTML = `<li class="empty">${escapeHtml(error.message)}</li>`;
  }
}

async function loadSession(id) {
  $("#session-title").textContent = id;
  $("#session-timeline").innerHTML = "";
  $("#session-summary").textContent = "";
  $("#session-checkpoints").innerHTML = "";
  try {
    const s = await api("/v1/sessions/" + encodeURIComponent(id));
    $("#session-title").textContent = s.title || s.id;
    $("#session-meta").textContent = `${s.id} · ${s.project} · ${s.agent} · ${when(s.started_at_ms)} → ${when(s.last_event_at_ms)}${s.archived_at_ms ? " · archived" : ""}`;
    for (const o of s.observations) {
      const li = document.createElement("li");
      li.className = "observation";
      li.innerHTML = `${kindBadge(o.kind)}${escapeHtml(o.title)}<span class="when">${when(o.occurred_at_ms)}</span>
        ${o.body && o.body !== o.title ? `<div class="snippet">${escapeHtml(o.body.slice(0, 400))}</div>` : ""}`;
      $("#session-timeline").append(li);
    }
    $("#session-summary").textContent = s.summary ? s.summary.text : "No summary yet.";
    if (!s.checkpoints.length) $("#session-checkpoints").innerHTML = `<p class="empty">No checkpoints.</p>`;
    for (const c of s.checkpoints) {
      const div = document.createElement("div");
      div.className = "panel";
      div.textContent = c.text;
      $("#session-checkpoints").append(div);
    }
  } catch (error) {
    $("#session-meta").textContent = error.message;
  }
}

// Patterns and stats -----------------------------------------------------------------------

async function loadPatterns() {
  try {
    const page = await api("/v1/patterns?limit=100");
    $("#patterns").innerHTML = page.patterns.length ? "" : `<li class="empty">No patterns yet.</li>`;
    for (const p of page.patterns) {
      const li = document.createElement("li");
      li.innerHTML = `${kindBadge(p.kind)}<b>${escapeHtml(p.title)}</b>
        <div class="hint">seen ${p.occurrences}× in ${p.sessions} sessions · last ${when(p.last_seen_at_ms)}</div>
        <div class="snippet">${escapeHtml(p.text.slice(0, 500))}</div>`;
      $("#patterns").append(li);
    }
  } catch (error) {
    $("#patterns").innerHTML = `<li class="empty">${escapeHtml(error.message)}</li>`;
  }
}

// A bar chart as inline SVG: one bar per row, labelled below.
function barChart(rows, label, value) {
  const width = 600, height = 160, pad = 18;
  const max = Math.max(1, ...rows.map(value));
  const bar = rows.length ? (width - pad) / rows.length : 0;
  const bars = rows.map((row, i) => {
    const h = Math.round((value(row) / max) * (height - 2 * pad));
    const x = pad + i * bar;
    return `<rect x="${x.toFixed(1)}" y="${height - pad - h}" width="${Math.max(1, bar - 2).toFixed(1)}" height="${h}"><title>${escapeHtml(label(row))}: ${value(row)}</title></rect>` +
      (rows.length <= 12 || i % Math.ceil(rows.length / 8) === 0
        ? `<text x="${x.toFixed(1)}" y="${height - 4}">${escapeHtml(label(row)).slice(-10)}</text>` : "");
  });
  return `<svg viewBox="0 0 ${width} ${height}" role="img">${bars.join("")}</svg>`;
}

async function loadStats() {
  try {
    const s = await api("/v1/stats?days=30");
    const counts = Object.assign({}, s.counts, { "tokens saved": s.tokens.saved_by_summaries + s.tokens.saved_by_checkpoints,
      "store MB": (s.store.size_bytes / 1048576).toFixed(1) });
    $("#counts").innerHTML = Object.entries(counts).map(([k, v]) => `<div><b>${escapeHtml(v)}</b>${escapeHtml(k.replaceAll("_", " "))}</div>`).join("");
    $("#chart-days").innerHTML = s.per_day.length ? barChart(s.per_day, (r) => r.day, (r) => r.observations) : `<p class="empty">No activity.</p>`;
    $("#chart-kinds").innerHTML = s.kinds.length ? barChart(s.kinds, (r) => r.kind, (r) => r.items) : `<p class="empty">Nothing indexed.</p>`;
    $("#projects").innerHTML = s.projects.map((p) => `<li><b>${escapeHtml(p.project)}</b><div class="hint">${p.sessions} sessions · ${p.events} events · ${when(p.last_event_at_ms)}</div></li>`).join("");
  } catch (error) {
    $("#counts").textContent = error.message;
  }
}

// Routing ----------------------------------------------------------------------------------

function show(view) {
  for (const section of document.querySelectorAll(".view")) section.hidden = section.id !== "view-" + view;
  for (const link of document.querySelectorAll("#nav a")) link.classList.toggle("active", link.dataset.view === view);
}

function route() {
  const hash = location.hash.replace(/^#\/?/, "") || "live";
  const [path, query] = hash.split("?");
  const [view, ...rest] = path.split("/");
  const params = new URLSearchParams(query || "");
  switch (view) {
    case "search": show("search"); runSearch(params); break;
    case "sessions": show("sessions"); loadSessions(true); break;
    case "session": show("session"); loadSession(decodeURIComponent(rest.join("/"))); break;
    case "patterns": show("patterns"); loadPatterns(); break;
    case "stats": show("stats"); loadStats(); break;
    default: show("live");
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("#search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const params = new URLSearchParams();
    for (const key of ["q", "kind", "project", "file", "concept", "mode"]) {
      const value = document.getElementById(key).value.trim();
      if (value && !(key === "mode" && value === "hybrid")) params.set(key, value);
    }
    location.hash = "#/search?" + params.toString();
  });
  $("#more-sessions").addEventListener("click", () => loadSessions(false));
  $("#token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.token = $("#token").value.trim();
    localStorage.setItem("mneme-token", state.token);
    $("#token-bar").hidden = true;
    connectStream();
    route();
  });
  window.addEventListener("hashchange", route);
  connectStream();
  route();
});
