// The search page of `cortex serve`: plain DOM, no framework, no build step, nothing
// fetched but this server's own API. Memory text is only ever put into the page as text
// nodes; a snippet's <mark> highlights are rebuilt as elements, never parsed as HTML.
"use strict";

(function () {
  const PAGE = 10;
  const RECENT_KEY = "cortex.recent";
  const TOKEN_KEY = "cortex.token";
  const $ = (id) => document.getElementById(id);
  const state = { offset: 0, last: null, done: 0 };

  // ------------------------------------------------------------------ helpers

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children) if (c !== null && c !== undefined) node.append(c);
    return node;
  }

  // A snippet as nodes: the text as text, each <mark>…</mark> pair as a <mark> element.
  function snippetNodes(snippet) {
    const frag = document.createDocumentFragment();
    const parts = String(snippet || "").split(/(<mark>|<\/mark>)/);
    let open = false;
    for (const part of parts) {
      if (part === "<mark>") open = true;
      else if (part === "</mark>") open = false;
      else if (part) frag.append(open ? el("mark", { text: part }) : document.createTextNode(part));
    }
    return frag;
  }

  function day(iso) {
    return iso ? String(iso).slice(0, 10) : "undated";
  }

  function when(iso) {
    if (!iso) return "undated";
    const d = new Date(iso);
    return isNaN(d) ? String(iso) : d.toISOString().slice(0, 16).replace("T", " ");
  }

  async function call(method, path, body) {
    const headers = { Accept: "application/json" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = "Bearer " + token;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let res;
    try {
      res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (e) {
      throw new Error("the server cannot be reached (" + e.message + ")");
    }
    let data = null;
    try { data = await res.json(); } catch (e) { data = null; }
    if (!res.ok) {
      if (res.status === 401) showToken();
      const err = new Error((data && data.error) || res.status + " " + res.statusText);
      err.status = res.status;
      throw err;
    }
    return data;
  }

  function showError(message) {
    const box = $("error");
    box.textContent = message;
    box.hidden = !message;
  }

  function showToken() {
    const box = $("token-box");
    box.hidden = false;
    $("token").focus();
  }

  // ------------------------------------------------------------------ recent searches

  function recent() {
    try { return JSON.parse(localStorage.getItem(RECENT_KEY) || "[]").filter((q) => typeof q === "string"); }
    catch (e) { return []; }
  }

  function remember(q) {
    if (!q) return;
    const list = [q, ...recent().filter((x) => x !== q)].slice(0, 10);
    localStorage.setItem(RECENT_KEY, JSON.stringify(list));
    renderRecent();
  }

  function renderRecent() {
    const dl = $("recent");
    dl.replaceChildren(...recent().map((q) => el("option", { value: q })));
  }

  // ------------------------------------------------------------------ the request

  function isoDay(d) { return d.toISOString().slice(0, 10); }

  function request() {
    const q = $("q").value.trim();
    const filters = {};
    const project = $("f-project").value;
    if (project) filters.projects = [project];
    const category = $("f-category").value.trim();
    if (category) filters.category = category;
    const since = $("f-since").value;
    const until = $("f-until").value;
    if (since || until) {
      filters.dateRange = {};
      if (since) filters.dateRange.start = since + "T00:00:00Z";
      if (until) filters.dateRange.end = until + "T23:59:59Z";
    }
    return {
      query: q || null,
      mode: $("f-mode").value,
      filters,
      explain: true,
      pagination: { limit: PAGE, offset: state.offset },
    };
  }

  async function search(resetPage) {
    if (resetPage) state.offset = 0;
    showError("");
    const q = $("q").value.trim();
    $("status").textContent = "Searching…";
    $("results").setAttribute("aria-busy", "true");
    try {
      const data = await call("POST", "/api/memories/search", request());
      remember(q);
      state.last = data;
      render(data);
    } catch (e) {
      $("status").textContent = "";
      $("results").replaceChildren();
      $("timeline").hidden = true;
      $("pager").hidden = true;
      $("suggestions").hidden = true;
      showError("Search failed: " + e.message);
    } finally {
      $("results").removeAttribute("aria-busy");
      document.body.dataset.searches = String(++state.done);  // for tests and scripts
    }
  }

  // ------------------------------------------------------------------ rendering

  function render(data) {
    const list = $("results");
    const rows = data.results || [];
    const page = data.pagination || {};
    const notices = (data.notices || []).join(" ");
    if (!rows.length) {
      list.replaceChildren(
        el("li", { class: "empty" },
          el("p", { text: state.offset ? "No more memories on this page." : "No memories match this search." }),
          el("p", { class: "help", text: "Try other words, another mode, or fewer filters." + (notices ? " " + notices : "") })));
      $("status").textContent = "No results.";
    } else {
      list.replaceChildren(...rows.map(card));
      const first = (page.offset || 0) + 1;
      const total = data.aggregations && data.aggregations.totalCount;
      $("status").textContent = "Showing " + first + "–" + (first + rows.length - 1) +
        (total ? " of " + total : "") + " (" + data.mode + " search)." + (notices ? " " + notices : "");
    }
    renderSuggestions(data.suggestions || []);
    renderTimeline(data.aggregations, rows);
    const pager = $("pager");
    pager.hidden = !(page.hasMore || state.offset > 0);
    $("prev-page").disabled = state.offset === 0;
    $("next-page").disabled = !page.hasMore;
    $("page-no").textContent = "Page " + (Math.floor(state.offset / PAGE) + 1);
  }

  // Follow-up queries the engine offers (a misspelt word corrected from the store's own
  // words, related terms when a search finds little): each one runs when chosen.
  function renderSuggestions(suggestions) {
    const box = $("suggestions");
    box.hidden = !suggestions.length;
    box.replaceChildren(
      ...(suggestions.length ? [document.createTextNode("Try: ")] : []),
      ...suggestions.flatMap((text, i) => [
        ...(i ? [document.createTextNode(" · ")] : []),
        el("button", {
          type: "button", class: "link suggestion",
          onclick: () => { $("q").value = text; search(true); },
        }, text),
      ]));
  }

  function card(r, index) {
    const m = r.memory;
    const where = m.source_path ? m.source_path.split("/").pop() + (m.chunk_index !== null && m.chunk_index !== undefined ? " #" + m.chunk_index : "") : (m.scope || m.category || "");
    const parts = r.explain || r.score_parts || {};
    const explainId = "explain-" + m.id;
    const detailId = "detail-" + m.id;
    const explainList = el("dl", { id: explainId, class: "explain", hidden: true },
      ...Object.entries(parts).flatMap(([k, v]) => [
        el("dt", { text: k }),
        el("dd", { text: typeof v === "number" ? v.toFixed(4) : String(v) }),
      ]));
    const explainBtn = el("button", {
      type: "button", class: "link", "aria-expanded": "false", "aria-controls": explainId,
      onclick: (ev) => { ev.stopPropagation(); toggle(explainBtn, explainList); },
    }, "explain");
    const detail = el("div", { id: detailId, class: "detail", hidden: true },
      el("p", { class: "content", text: m.content }),
      el("div", { class: "context", "aria-live": "polite" }));
    const article = el("article", {
      class: "card", tabindex: "0", "aria-labelledby": "title-" + m.id, "data-id": m.id,
      "aria-expanded": "false",
    },
      el("header", {},
        el("h3", { id: "title-" + m.id },
          el("span", { class: "when", text: when(m.created_at) }),
          m.project ? el("span", { class: "project", text: m.project }) : null,
          where ? el("span", { class: "source", text: where }) : null),
        el("span", { class: "score" }, "score " + Number(r.score).toFixed(3) + " · " + r.match_type + " · ", explainBtn)),
      el("p", { class: "snippet" }, snippetNodes(r.snippet || m.content)),
      explainList,
      detail,
      el("div", { class: "actions" },
        el("button", { type: "button", onclick: (ev) => { ev.stopPropagation(); neighbour(r, detail, "previous"); } }, "← Previous"),
        el("button", { type: "button", onclick: (ev) => { ev.stopPropagation(); thread(r, detail); } }, "View thread"),
        el("button", { type: "button", onclick: (ev) => { ev.stopPropagation(); neighbour(r, detail, "next"); } }, "Next →")));
    article.addEventListener("click", () => open(article, detail));
    article.addEventListener("keydown", (ev) => {
      if (ev.target !== article) return;
      if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); open(article, detail); }
    });
    return el("li", {}, article);
  }

  function toggle(button, target) {
    const show = target.hidden;
    target.hidden = !show;
    button.setAttribute("aria-expanded", String(show));
  }

  function open(article, detail) {
    const show = detail.hidden;
    detail.hidden = !show;
    article.setAttribute("aria-expanded", String(show));
  }

  function contextBox(detail) {
    detail.hidden = false;
    detail.closest("article").setAttribute("aria-expanded", "true");
    return detail.querySelector(".context");
  }

  function chunk(label, m) {
    return el("div", { class: "chunk" },
      el("h4", { text: label + " · " + when(m.created_at) + (m.source_path ? " · " + m.source_path.split("/").pop() : "") }),
      el("p", { text: m.content }));
  }

  async function neighbour(r, detail, which) {
    const box = contextBox(detail);
    const given = r.context && r.context[which + "_chunk"];
    if (given) { box.replaceChildren(chunk(which === "previous" ? "Previous" : "Next", given)); return; }
    box.replaceChildren(el("p", { class: "help", text: "Loading…" }));
    try {
      const tl = await call("GET", "/api/memories/" + r.memory.id + "/timeline?before=1&after=1");
      const m = which === "previous" ? tl.before[tl.before.length - 1] : tl.after[0];
      box.replaceChildren(m ? chunk(which === "previous" ? "Previous" : "Next", m)
        : el("p", { class: "help", text: "Nothing " + (which === "previous" ? "before" : "after") + " this memory in its project." }));
    } catch (e) {
      box.replaceChildren(el("p", { class: "error", role: "alert", text: e.message }));
    }
  }

  async function thread(r, detail) {
    const box = contextBox(detail);
    box.replaceChildren(el("p", { class: "help", text: "Loading…" }));
    try {
      let items;
      let title;
      const session = r.source_session;
      if (session && session.id) {
        const filters = { session: session.id };
        if (r.memory.project) filters.projects = [r.memory.project];
        const data = await call("POST", "/api/memories/search", {
          query: null, filters, sort: { by: "recency" }, pagination: { limit: 50 },
        });
        items = data.results.map((x) => x.memory).reverse();
        title = "Session " + session.id + (session.summary ? ": " + session.summary : "");
      } else {
        const tl = await call("GET", "/api/memories/" + r.memory.id + "/timeline?before=3&after=3");
        items = [...tl.before, tl.anchor, ...tl.after];
        title = "Around this memory in " + (r.memory.project || "its project");
      }
      box.replaceChildren(el("h4", { text: title }),
        el("ol", { class: "thread" }, ...items.map((m) => el("li", { class: m.id === r.memory.id ? "here" : null },
          el("span", { class: "when", text: when(m.created_at) }), " ", document.createTextNode(m.content)))));
    } catch (e) {
      box.replaceChildren(el("p", { class: "error", role: "alert", text: e.message }));
    }
  }

  // The time distribution: the engine's when it counts every match, else the page's own.
  function renderTimeline(agg, rows) {
    let buckets = agg && agg.timeDistribution && agg.timeDistribution.buckets;
    let unit = (agg && agg.timeDistribution && agg.timeDistribution.unit) || "day";
    if (!Array.isArray(buckets)) {
      const counts = {};
      for (const r of rows) { const d = day(r.memory.created_at); counts[d] = (counts[d] || 0) + 1; }
      buckets = Object.keys(counts).sort().map((d) => ({ start: d, count: counts[d] }));
      unit = "day";
    }
    buckets = buckets.filter((b) => b.start && b.start !== "undated");
    const box = $("timeline");
    if (!buckets.length) { box.hidden = true; return; }
    box.hidden = false;
    const max = Math.max(...buckets.map((b) => b.count));
    $("bars").replaceChildren(...buckets.map((b) => {
      const start = String(b.start).slice(0, 10);
      const label = start + ": " + b.count + (b.count === 1 ? " memory" : " memories");
      const bar = el("button", {
        type: "button", class: "bar", title: label, "aria-label": label,
        onclick: () => narrow(start, unit),
      }, el("span", { class: "bar-fill" }), el("span", { class: "bar-label", text: start.slice(5) }));
      // through the CSSOM: the page's CSP allows no inline style attribute
      bar.style.setProperty("--h", Math.max(8, Math.round(100 * b.count / max)) + "%");
      return bar;
    }));
  }

  function narrow(start, unit) {
    const from = new Date(start + "T00:00:00Z");
    const to = new Date(from);
    if (unit === "week") to.setUTCDate(to.getUTCDate() + 6);
    else if (unit === "month") { to.setUTCMonth(to.getUTCMonth() + 1); to.setUTCDate(0); }
    $("f-time").value = "";
    $("f-since").value = isoDay(from);
    $("f-until").value = isoDay(to);
    search(true);
  }

  // ------------------------------------------------------------------ set-up

  async function loadProjects() {
    try {
      const data = await call("GET", "/api/projects");
      const select = $("f-project");
      // "" stands for memories without a project, which no project filter selects
      const names = Object.keys(data.projects || {}).filter((p) => p !== "").sort();
      select.replaceChildren(el("option", { value: "", text: "All projects" }),
        ...names.map((p) => el("option", { value: p, text: p })));
    } catch (e) {
      if (e.status !== 401) showError("Projects could not be listed: " + e.message);
    }
  }

  function moveFocus(step) {
    const cards = Array.from(document.querySelectorAll("#results article.card"));
    if (!cards.length) return;
    const at = cards.indexOf(document.activeElement);
    const next = at === -1 ? (step > 0 ? 0 : cards.length - 1) : Math.min(cards.length - 1, Math.max(0, at + step));
    cards[next].focus();
    cards[next].scrollIntoView({ block: "nearest" });
  }

  document.addEventListener("keydown", (ev) => {
    const t = ev.target;
    const typing = t instanceof HTMLInputElement || t instanceof HTMLTextAreaElement || t instanceof HTMLSelectElement;
    if (ev.key === "/" && !typing && !ev.ctrlKey && !ev.metaKey && !ev.altKey) {
      ev.preventDefault();
      $("q").focus();
      $("q").select();
    } else if ((ev.key === "ArrowDown" || ev.key === "ArrowUp") && (!typing || t.id === "q")) {
      if (t.id === "q" && ev.key === "ArrowUp") return;
      if (t.id === "q" && !document.querySelector("#results article.card")) return;
      ev.preventDefault();
      moveFocus(ev.key === "ArrowDown" ? 1 : -1);
    }
  });

  $("search").addEventListener("submit", (ev) => { ev.preventDefault(); search(true); });
  $("f-time").addEventListener("change", () => {
    const days = Number($("f-time").value);
    $("f-until").value = "";
    $("f-since").value = days ? isoDay(new Date(Date.now() - days * 86400000)) : "";
    search(true);
  });
  for (const id of ["f-project", "f-mode", "f-since", "f-until"]) $(id).addEventListener("change", () => search(true));
  $("f-category").addEventListener("change", () => search(true));
  $("prev-page").addEventListener("click", () => { state.offset = Math.max(0, state.offset - PAGE); search(false); });
  $("next-page").addEventListener("click", () => { state.offset += PAGE; search(false); });
  $("token-save").addEventListener("click", () => {
    sessionStorage.setItem(TOKEN_KEY, $("token").value);
    $("token-box").hidden = true;
    showError("");
    loadProjects();
    $("q").focus();
  });

  renderRecent();
  loadProjects();
})();
