// The mneme dashboard: plain JavaScript over the api's REST endpoints and live stream.
// No build step and nothing fetched from the network beyond this api.
"use strict";

const $ = (selector) => document.querySelector(selector);
const state = {
  token: localStorage.getItem("mneme-token") || "",
  sessionsOffset: 0,
  source: null,
  view: "",
  // The home screen's pending refresh and its readiness poll.
  refresh: null,
  poll: null,
};

// `mneme up` prints the dashboard's address as http://…/#token=<token>. The token is kept as the
// token form keeps it, and taken off the address at once, so it is neither left on screen nor
// in the history, bookmarks or a screenshot. It is looked for when the page loads and on every
// change of the address, as pasting that address into an open dashboard changes only its hash.
// Returns whether a token was taken.
function takeTokenFromAddress() {
  const match = /^#token=([^&]*)/.exec(location.hash);
  if (!match) return false;
  let token = "";
  try {
    token = decodeURIComponent(match[1]).trim();
  } catch (_) { /* a malformed escape is no token */ }
  history.replaceState(null, "", location.pathname + location.search);
  if (!token) return false;
  state.token = token;
  localStorage.setItem("mneme-token", token);
  return true;
}
takeTokenFromAddress();

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

// A UTC day ("2026-02-12") as the reader's locale writes a date.
function dayLabel(day, options) {
  const date = new Date(day + "T00:00:00Z");
  if (Number.isNaN(date.getTime())) return String(day);
  return date.toLocaleDateString(undefined, Object.assign({ timeZone: "UTC" }, options));
}

function number(n) {
  return Number(n || 0).toLocaleString();
}

// "1 session", "2 sessions".
function count(n, noun) {
  return `${number(n)} ${noun}${Number(n) === 1 ? "" : "s"}`;
}

// The last part of a project path, which is what tells projects apart on a small screen.
function projectName(project) {
  const parts = String(project || "").split(/[\\/]/).filter(Boolean);
  return parts.length ? parts[parts.length - 1] : "(no project)";
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
      scheduleHomeRefresh();
    });
  }
  source.onerror = () => {
    $("#status").textContent = "reconnecting";
    $("#status").classList.remove("live");
  };
}

// Home -------------------------------------------------------------------------------------

// What the first screen shows: how much is remembered, the latest sessions with their
// summaries, the latest checkpoint to resume from, what recurs, and when the work happened.
// With nothing stored it shows how to connect an agent instead.
async function loadHome() {
  const [stats, sessions, checkpoints, patterns] = await Promise.allSettled([
    api("/v1/stats?days=30"),
    api("/v1/sessions?limit=8&summaries=true"),
    api("/v1/checkpoints?limit=1"),
    api("/v1/patterns?limit=100&min_occurrences=2"),
  ]);
  if (stats.status === "rejected") {
    $("#connect").hidden = true;
    $("#overview").hidden = false;
    $("#home-counts").innerHTML = `<p class="empty">${escapeHtml(stats.reason.message)}</p>`;
    return;
  }
  const s = stats.value;
  const empty = !s.counts.sessions && !s.counts.memory_items;
  $("#connect").hidden = !empty;
  $("#overview").hidden = empty;
  if (empty) return;
  const counts = [
    ["sessions", s.counts.sessions], ["observations", s.counts.observations],
    ["memory items", s.counts.memory_items], ["summaries", s.counts.session_summaries],
    ["patterns", s.counts.patterns],
  ];
  $("#home-counts").innerHTML = counts.map(([k, v]) => `<div><b>${number(v)}</b>${escapeHtml(k)}</div>`).join("");
  renderHomeSessions(sessions);
  renderCheckpoint(checkpoints);
  renderHomePatterns(patterns);
  drawActivity(s.per_day, $("#home-activity"), $("#home-activity-range"));
}

function listItems(items, max) {
  const shown = (items || []).slice(0, max).map((i) => `<li>${escapeHtml(i)}</li>`).join("");
  const more = (items || []).length > max ? `<li class="hint">and ${items.length - max} more</li>` : "";
  return shown ? `<ul class="bullets">${shown}${more}</ul>` : "";
}

function renderHomeSessions(result) {
  const list = $("#home-sessions");
  if (result.status === "rejected") {
    list.innerHTML = `<li class="empty">${escapeHtml(result.reason.message)}</li>`;
    return;
  }
  list.innerHTML = result.value.sessions.length ? "" : `<li class="empty">No sessions yet.</li>`;
  for (const session of result.value.sessions) {
    const summary = session.summary;
    const li = document.createElement("li");
    li.className = "session-card";
    const title = session.title || (summary && summary.request) || session.id;
    const errors = session.errors ? `, ${count(session.errors, "error")}` : "";
    let body = `<p class="empty">No summary yet.</p>`;
    if (summary) {
      const status = summary.status === "final" ? "" : `<span class="kind">in progress</span>`;
      // The request usually begins with the first prompt, which is the title already.
      const request = summary.request || "";
      const head = title.replace(/…$/, "");
      const shown = request.startsWith(head) ? request.slice(head.length).replace(/^[\s;:.…]+/, "") : request;
      const asked = shown || status ? `<p class="asked">${status}${escapeHtml(shown)}</p>` : "";
      const files = summary.files_modified.length
        ? `<p class="hint">${count(summary.files_modified.length, "file")} changed</p>` : "";
      body = `<div class="summary">${asked}${listItems(summary.done, 3)}${files}</div>`;
    }
    li.innerHTML = `<a class="title" href="#/session/${encodeURIComponent(session.id)}">${escapeHtml(title)}</a>
      <div class="hint"><span title="${escapeHtml(session.project)}">${escapeHtml(projectName(session.project))}</span> · ${escapeHtml(session.agent)} · ${when(session.last_event_at_ms)} · ${count(session.events, "event")}${errors}</div>
      ${body}`;
    list.append(li);
  }
}

function renderCheckpoint(result) {
  const box = $("#home-checkpoint");
  if (result.status === "rejected") {
    box.innerHTML = `<p class="empty">${escapeHtml(result.reason.message)}</p>`;
    return;
  }
  const c = result.value.checkpoints[0];
  if (!c) {
    box.innerHTML = `<p class="empty">No checkpoint yet: one is made when an agent compacts its context.</p>`;
    return;
  }
  const open = c.open_tasks.length ? `<h3>Open tasks</h3>${listItems(c.open_tasks, 5)}` : "";
  const decisions = c.decisions.length ? `<h3>Decisions</h3>${listItems(c.decisions, 3)}` : "";
  box.innerHTML = `<div class="panel checkpoint">
      <div class="hint"><span title="${escapeHtml(c.project)}">${escapeHtml(projectName(c.project))}</span> · ${when(c.occurred_at_ms)} ·
        <a href="#/session/${encodeURIComponent(c.session_id)}">open the session</a></div>
      <p class="text">${escapeHtml(c.summary || c.text)}</p>${open}${decisions}
    </div>`;
}

function renderHomePatterns(result) {
  const list = $("#home-patterns");
  if (result.status === "rejected") {
    list.innerHTML = `<li class="empty">${escapeHtml(result.reason.message)}</li>`;
    return;
  }
  // What recurs across the most sessions first: a pattern of one session is a habit of that
  // session, one of many is how the project works. The api lists the most recent first.
  const patterns = result.value.patterns
    .slice()
    .sort((a, b) => b.sessions - a.sessions || b.occurrences - a.occurrences || b.last_seen_at_ms - a.last_seen_at_ms)
    .slice(0, 6);
  list.innerHTML = patterns.length ? "" : `<li class="empty">Nothing has recurred yet.</li>`;
  for (const p of patterns) {
    const li = document.createElement("li");
    li.className = "pattern";
    li.innerHTML = `${kindBadge(p.kind)}<b>${escapeHtml(p.title)}</b>
      <div class="hint">seen ${number(p.occurrences)}× in ${count(p.sessions, "session")} · last ${when(p.last_seen_at_ms)}</div>`;
    list.append(li);
  }
}

// Live events change what the home screen shows; it is redrawn at most every few seconds, so
// an import of thousands of events does not redraw it thousands of times.
function scheduleHomeRefresh() {
  if (state.view !== "home" || state.refresh) return;
  state.refresh = setTimeout(() => {
    state.refresh = null;
    if (state.view === "home") loadHome();
  }, 3000);
}

// The services' backlogs, from /readyz: while retrieval still embeds, semantic search covers
// only part of memory, and the reader should know how far it has got and how long it needs.
// Retrieval's "model" backlog is the model filling in behind static vectors: search already
// covers those items by meaning, a little less well.
function backlogLine(b) {
  let what = `${b.name.charAt(0).toUpperCase()}${b.name.slice(1)}: ${number(b.done)} of ${number(b.total)} done`;
  if (b.name === "embedding") {
    what = `Semantic search covers ${number(b.done)} of ${number(b.total)} items`;
  } else if (b.name === "model") {
    what = `Semantic search covers ${number(b.total)} items, ${number(b.total - b.done)} of them by static vectors until the model reaches them`;
  }
  let pace = "no progress measured yet";
  if (b.rate_per_s > 0 && b.eta_ms > 0) {
    const rate = b.rate_per_s >= 10 ? Math.round(b.rate_per_s) : b.rate_per_s.toFixed(1);
    pace = `${rate} items/s, ${duration(b.eta_ms)} left`;
  }
  return `${what}; ${pace}.`;
}

function duration(ms) {
  const minutes = Math.round(ms / 60000);
  if (minutes < 1) return `about ${Math.max(1, Math.round(ms / 1000))} s`;
  if (minutes < 60) return `about ${minutes} min`;
  const hours = Math.floor(minutes / 60);
  return `about ${hours} h ${minutes % 60} min`;
}

const SERVICE_ROLES = {
  ingest: "nothing new is stored",
  retrieval: "search does not answer",
  compressor: "no new summaries or checkpoints",
  pattern: "no new patterns",
};

async function loadReadiness() {
  let pending = false;
  try {
    const response = await fetch("/readyz");
    const ready = await response.json();
    const lines = [];
    const down = [];
    for (const [service, health] of Object.entries(ready.services || {})) {
      const behind = (health.backlogs || []).filter((b) => b.eta_ms !== 0 && b.done < b.total);
      for (const b of behind) {
        // While items still wait for any vector, that is the line to read; the model's own
        // progress follows once everything is covered.
        if (b.name === "model" && behind.some((o) => o.name === "embedding")) continue;
        lines.push(backlogLine(b));
      }
      if (!health.ok) down.push(`${service} (${SERVICE_ROLES[service] || health.detail})`);
    }
    pending = lines.length > 0;
    $("#backlog").textContent = lines.join(" ");
    $("#backlog").hidden = !pending;
    $("#service-warning").textContent = down.length ? `Not answering: ${down.join("; ")}.` : "";
    $("#service-warning").hidden = !down.length;
  } catch (_) {
    $("#service-warning").textContent = "The api does not answer.";
    $("#service-warning").hidden = false;
  }
  // Every few seconds while something is behind, so the estimate moves; rarely otherwise.
  clearTimeout(state.poll);
  if (state.view === "home") state.poll = setTimeout(loadReadiness, pending ? 5000 : 30000);
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

// Workflows, lessons and capabilities ---------------------------------------------------------

// A workflow's text is "When asked: …", "Steps: …" and its record, a line each.
function workflowItem(p) {
  const lines = p.text.split("\n").filter((l) => l.trim() && !l.startsWith("When asked:"));
  const record = `worked ${p.occurrences}×` + (p.failures ? `, failed ${p.failures}×` : "");
  const li = document.createElement("li");
  li.className = p.failures ? "workflow failing" : "workflow";
  li.innerHTML = `<b>${escapeHtml(p.title.replace(/^Workflow: /, ""))}</b>
    <div class="hint">${escapeHtml(record)} · ${escapeHtml(projectName(p.project))} · last ${when(p.last_seen_at_ms)}</div>
    ${lines.map((l) => `<div class="snippet">${escapeHtml(l)}</div>`).join("")}`;
  return li;
}

async function loadWorkflows() {
  const fill = async (path, list, empty, item) => {
    try {
      const page = await api(path);
      list.innerHTML = page.patterns.length ? "" : `<li class="empty">${empty}</li>`;
      for (const p of page.patterns) list.append(item(p));
    } catch (error) {
      list.innerHTML = `<li class="empty">${escapeHtml(error.message)}</li>`;
    }
  };
  fill("/v1/patterns?kind=workflow&min_occurrences=0&limit=100", $("#workflows"),
    "No workflows yet: they appear once a turn of work runs commands that succeed.", workflowItem);
  fill("/v1/patterns?kind=reflection&limit=50", $("#lessons"), "No lessons yet.", (p) => {
    const li = document.createElement("li");
    li.innerHTML = `<b>${escapeHtml(p.title)}</b><div class="snippet">${escapeHtml(p.text)}</div>
      <div class="hint">${escapeHtml(projectName(p.project))} · last ${when(p.last_seen_at_ms)}</div>`;
    return li;
  });
  try {
    const { capabilities } = await api("/v1/capabilities?project=" + encodeURIComponent($("#match-project").value.trim()));
    $("#capability-count").textContent = count(capabilities.length, "capability");
    const byCategory = new Map();
    for (const c of capabilities) {
      if (!byCategory.has(c.category)) byCategory.set(c.category, []);
      byCategory.get(c.category).push(c);
    }
    $("#capabilities").innerHTML = capabilities.length ? "" :
      `<p class="empty">None registered: <code>mneme capabilities scan</code> finds the skills, commands and tasks of this machine and project.</p>`;
    for (const [category, members] of [...byCategory].sort((a, b) => a[0].localeCompare(b[0]))) {
      const block = document.createElement("details");
      block.innerHTML = `<summary>${escapeHtml(category || "uncategorised")} (${members.length})</summary>
        <ul class="pattern-list">${members.map((c) => `<li><b>${escapeHtml(c.name)}</b> <code>${escapeHtml(c.invoke)}</code>
          <div class="hint">${escapeHtml(c.description)} · ${escapeHtml(c.scope)}</div></li>`).join("")}</ul>`;
      $("#capabilities").append(block);
    }
  } catch (error) {
    $("#capabilities").innerHTML = `<p class="empty">${escapeHtml(error.message)}</p>`;
  }
}

async function runMatch() {
  const prompt = $("#match-prompt").value.trim();
  if (!prompt) return;
  const project = $("#match-project").value.trim();
  const results = $("#match-results");
  try {
    const params = new URLSearchParams({ prompt });
    if (project) params.set("project", project);
    const { matches } = await api("/v1/capabilities/match?" + params.toString());
    results.innerHTML = matches.length ? "" : `<li class="empty">Nothing clears the threshold: nothing would be injected.</li>`;
    for (const m of matches) {
      const li = document.createElement("li");
      li.innerHTML = `<b>${escapeHtml(m.name)}</b> <code>${escapeHtml(m.invoke)}</code> <span class="hint">score ${m.score.toFixed(3)}</span>
        <div class="snippet">${escapeHtml(m.description)}</div>`;
      results.append(li);
    }
  } catch (error) {
    results.innerHTML = `<li class="empty">${escapeHtml(error.message)}</li>`;
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

// Observations per day, by when they happened. The api lists every day of the range, which
// ends on the day of the newest event: imported history is drawn where it lies in time.
function drawActivity(days, chart, caption) {
  days = days || [];
  const total = days.reduce((sum, d) => sum + d.observations, 0);
  chart.dataset.from = days.length ? days[0].day : "";
  chart.dataset.to = days.length ? days[days.length - 1].day : "";
  chart.dataset.total = String(total);
  if (!days.length || !total) {
    caption.textContent = "";
    chart.innerHTML = `<p class="empty">No activity in these ${days.length} days.</p>`;
    return;
  }
  const long = { day: "numeric", month: "short", year: "numeric" };
  caption.textContent = `${days.length} days to ${dayLabel(chart.dataset.to, long)}`;
  // Drawn at the width it is shown at, so its labels keep the page's text size.
  const width = Math.max(280, Math.round(chart.clientWidth || 600)), height = 150, top = 12, bottom = 20;
  const max = Math.max(1, ...days.map((d) => d.observations));
  const step = (width - 2) / days.length;
  const every = Math.ceil(days.length / 6);
  const parts = days.map((d, i) => {
    const h = d.observations ? Math.max(1, Math.round((d.observations / max) * (height - top - bottom))) : 0;
    const x = 1 + i * step;
    const tip = `${dayLabel(d.day, long)}: ${count(d.observations, "event")}, ${count(d.prompts, "prompt")}, ${count(d.errors, "error")}`;
    // Labelled back from the newest day, which is always named; it is anchored at its end so
    // it never runs off the chart.
    const last = i === days.length - 1;
    const label = (days.length - 1 - i) % every === 0
      ? `<text x="${(last ? width : x + step / 2).toFixed(1)}" y="${height - 5}" text-anchor="${last ? "end" : "middle"}">${escapeHtml(dayLabel(d.day, { day: "numeric", month: "short" }))}</text>` : "";
    return `<rect x="${x.toFixed(1)}" y="${height - bottom - h}" width="${Math.max(1, step - 1).toFixed(1)}" height="${h}" data-day="${escapeHtml(d.day)}"><title>${escapeHtml(tip)}</title></rect>${label}`;
  });
  const axis = `<line x1="0" x2="${width}" y1="${height - bottom + 0.5}" y2="${height - bottom + 0.5}"></line>` +
    `<text x="2" y="${top - 2}">${number(max)} a day</text>`;
  chart.innerHTML = `<svg viewBox="0 0 ${width} ${height}" role="img" aria-label="events per day">${axis}${parts.join("")}</svg>`;
}

async function loadStats() {
  const days = $("#stats-days").value || "30";
  try {
    const s = await api(`/v1/stats?days=${encodeURIComponent(days)}`);
    const counts = Object.assign({}, s.counts, { "tokens saved": s.tokens.saved_by_summaries + s.tokens.saved_by_checkpoints,
      "store MB": (s.store.size_bytes / 1048576).toFixed(1) });
    $("#counts").innerHTML = Object.entries(counts).map(([k, v]) => `<div><b>${escapeHtml(typeof v === "number" ? number(v) : v)}</b>${escapeHtml(k.replaceAll("_", " "))}</div>`).join("");
    drawActivity(s.per_day, $("#chart-days"), $("#chart-days-range"));
    $("#chart-kinds").innerHTML = s.kinds.length ? barChart(s.kinds, (r) => r.kind, (r) => r.items) : `<p class="empty">Nothing indexed.</p>`;
    $("#projects").innerHTML = s.projects.map((p) => `<li><b title="${escapeHtml(p.project)}">${escapeHtml(projectName(p.project))}</b><div class="hint">${escapeHtml(p.project)}<br>${count(p.sessions, "session")} · ${count(p.events, "event")} · ${when(p.last_event_at_ms)}</div></li>`).join("");
  } catch (error) {
    $("#counts").textContent = error.message;
  }
}

// Routing ----------------------------------------------------------------------------------

function show(view) {
  state.view = view;
  for (const section of document.querySelectorAll(".view")) section.hidden = section.id !== "view-" + view;
  for (const link of document.querySelectorAll("#nav a")) link.classList.toggle("active", link.dataset.view === view);
}

function route() {
  if (takeTokenFromAddress()) {
    $("#token-bar").hidden = true;
    connectStream();
  }
  const hash = location.hash.replace(/^#\/?/, "") || "home";
  const [path, query] = hash.split("?");
  const [view, ...rest] = path.split("/");
  const params = new URLSearchParams(query || "");
  switch (view) {
    case "search": show("search"); runSearch(params); break;
    case "sessions": show("sessions"); loadSessions(true); break;
    case "session": show("session"); loadSession(decodeURIComponent(rest.join("/"))); break;
    case "patterns": show("patterns"); loadPatterns(); break;
    case "workflows": show("workflows"); loadWorkflows(); break;
    case "stats": show("stats"); loadStats(); break;
    // The home screen, under its old name too (`#/live`), so earlier links still open it.
    default: show("home"); loadHome(); loadReadiness();
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
  $("#match-form").addEventListener("submit", (event) => {
    event.preventDefault();
    runMatch();
  });
  $("#stats-days").addEventListener("change", loadStats);
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
