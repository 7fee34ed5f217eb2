// tracefix web UI: the session page's waterfall (session.html loads it; the CSP allows no inline script).
// Rows come from GET /session/waterfall a page at a time (compact arrays, ui/waterfall.py) and only the
// rows in view are in the page: a few dozen row elements are reused as the list scrolls, so a session of
// 10,000 steps (~30,000 spans) scrolls and zooms as fast as one of ten. Positions are set through
// element.style (CSSOM), which the CSP's style-src 'self' allows, unlike style attributes in markup.
"use strict";

(function () {
  const ROW_H = 22; // px, as .wf-row's height in ui.css
  const OVERSCAN = 10; // rows drawn above and below the visible ones
  const MIN_VIEW_MS = 0.001;
  const ZOOM = 1.6;
  const MAX_BODY_PX = 460; // the list's height once the rows fill it; it scrolls after

  function formatMs(ms) {
    const a = Math.abs(ms);
    if (a === 0) return "0";
    if (a < 1) return (ms * 1000).toFixed(a < 0.01 ? 1 : 0) + " µs";
    if (a < 1000) return (a < 10 ? ms.toFixed(2) : a < 100 ? ms.toFixed(1) : ms.toFixed(0)) + " ms";
    if (a < 600000) return (ms / 1000).toFixed(a < 10000 ? 2 : a < 100000 ? 1 : 0) + " s";
    return (ms / 60000).toFixed(2) + " min";
  }

  // a round tick interval (1, 2 or 5 times a power of ten) giving about `count` ticks over `range`
  function tickStep(range, count) {
    const raw = range / count;
    const power = Math.pow(10, Math.floor(Math.log10(raw)));
    const scaled = raw / power;
    return power * (scaled < 1.5 ? 1 : scaled < 3.5 ? 2 : scaled < 7.5 ? 5 : 10);
  }

  function Waterfall(root) {
    const body = document.getElementById("wf-body");
    const spacer = document.getElementById("wf-spacer");
    const axis = document.getElementById("wf-axis");
    const detail = document.getElementById("wf-detail");
    const status = document.getElementById("wf-status");
    const rows = [];
    const byId = new Map();
    let col = {};
    let fullMs = 1;
    let view = { t0: 0, t1: 1 };
    let selected = -1;
    let total = 0;
    const shown = new Map(); // row number -> its element
    const spare = [];
    let panelTimer = 0;
    let panelAsked = "";

    function trackWidth() {
      const track = axis.querySelector(".wf-ticks");
      return track ? track.clientWidth : 1;
    }

    function trackLeft() {
      const track = axis.querySelector(".wf-ticks");
      return track ? track.getBoundingClientRect().left : 0;
    }

    function msAt(clientX) {
      return view.t0 + (clientX - trackLeft()) / trackWidth() * (view.t1 - view.t0);
    }

    function setView(t0, t1) {
      let span = Math.max(MIN_VIEW_MS, Math.min(fullMs, t1 - t0));
      t0 = Math.max(0, Math.min(t0, fullMs - span));
      view = { t0: t0, t1: t0 + span };
      draw();
    }

    function zoom(factor, center) {
      if (center === undefined) center = (view.t0 + view.t1) / 2;
      const span = (view.t1 - view.t0) * factor;
      const share = (center - view.t0) / (view.t1 - view.t0);
      setView(center - share * span, center - share * span + span);
    }

    function pan(share) {
      const span = view.t1 - view.t0;
      setView(view.t0 + share * span, view.t1 + share * span);
    }

    function zoomToSpan() {
      if (selected < 0) return;
      const r = rows[selected];
      const start = r[col.start_ms], dur = Math.max(r[col.duration_ms], MIN_VIEW_MS * 10);
      setView(start - dur * 0.05, start + dur * 1.05);
    }

    function drawAxis() {
      axis.dataset.t0 = String(view.t0);
      axis.dataset.t1 = String(view.t1);
      let ticks = axis.querySelector(".wf-ticks");
      if (!ticks) {
        const label = document.createElement("div");
        label.className = "wf-axis-label";
        label.textContent = "span";
        ticks = document.createElement("div");
        ticks.className = "wf-ticks";
        axis.append(label, ticks);
      }
      ticks.textContent = "";
      const span = view.t1 - view.t0;
      const step = tickStep(span, Math.max(2, Math.floor(ticks.clientWidth / 90))); // a label is < 90 px
      for (let t = Math.ceil(view.t0 / step) * step; t <= view.t1 + step * 1e-9; t += step) {
        const tick = document.createElement("span");
        tick.className = "wf-tick";
        tick.style.left = ((t - view.t0) / span * 100) + "%";
        tick.textContent = formatMs(t);
        ticks.appendChild(tick);
      }
    }

    function newRow() {
      const el = document.createElement("div");
      el.className = "wf-row";
      el.setAttribute("role", "treeitem");
      const label = document.createElement("div");
      label.className = "wf-label";
      const name = document.createElement("span");
      name.className = "wf-name";
      const dur = document.createElement("span");
      dur.className = "wf-dur";
      label.append(name, dur);
      const track = document.createElement("div");
      track.className = "wf-track";
      const bar = document.createElement("div");
      bar.className = "wf-bar";
      track.appendChild(bar);
      el.append(label, track);
      return el;
    }

    function fill(el, i) {
      const r = rows[i];
      const kind = r[col.kind] || "other";
      const depth = r[col.depth];
      el.dataset.row = String(i);
      el.id = "wf-row-" + i; // the list's aria-activedescendant names the selected one
      el.dataset.span = r[col.span_id];
      el.dataset.depth = String(depth);
      el.dataset.kind = kind;
      el.setAttribute("aria-level", String(depth + 1));
      el.style.top = (i * ROW_H) + "px";
      const label = el.firstChild;
      label.style.paddingLeft = (4 + Math.min(depth, 24) * 12) + "px";
      label.firstChild.textContent = r[col.name] || "(no name)";
      label.lastChild.textContent = formatMs(r[col.duration_ms]);
      const bar = el.lastChild.firstChild;
      bar.className = "wf-bar kind-" + kind + (r[col.error] ? " failed" : "");
      bar.dataset.span = r[col.span_id];
      el.title = (r[col.name] || "") + " · " + kind + (r[col.agent] ? " · " + r[col.agent] : "")
        + (r[col.step] !== null ? " · step " + r[col.step] : "") + " · starts at " + formatMs(r[col.start_ms])
        + " · " + formatMs(r[col.duration_ms]) + (r[col.error] ? " · error" : "");
    }

    function place(el, i) {
      const r = rows[i];
      const span = view.t1 - view.t0;
      const start = r[col.start_ms], end = start + r[col.duration_ms];
      const bar = el.lastChild.firstChild;
      bar.hidden = end < view.t0 || start > view.t1;
      const left = Math.max(start, view.t0), right = Math.min(end, view.t1);
      bar.style.left = ((left - view.t0) / span * 100) + "%";
      bar.style.width = (Math.max(0, right - left) / span * 100) + "%";
      el.classList.toggle("selected", i === selected);
      el.setAttribute("aria-selected", i === selected ? "true" : "false");
    }

    function draw() {
      drawAxis();
      const top = body.scrollTop, height = body.clientHeight || 400;
      const first = Math.max(0, Math.floor(top / ROW_H) - OVERSCAN);
      const last = Math.min(rows.length, Math.ceil((top + height) / ROW_H) + OVERSCAN);
      shown.forEach(function (el, i) {
        if (i < first || i >= last) {
          shown.delete(i);
          el.remove();
          spare.push(el);
        }
      });
      for (let i = first; i < last; i++) {
        let el = shown.get(i);
        if (!el) {
          el = spare.pop() || newRow();
          fill(el, i);
          body.appendChild(el);
          shown.set(i, el);
        }
        place(el, i);
      }
      body.dataset.drawn = String(shown.size);
    }

    function showPanel(spanId) {
      if (panelAsked === spanId) return;
      panelAsked = spanId;
      window.clearTimeout(panelTimer);
      panelTimer = window.setTimeout(function () {
        fetch(root.dataset.panel + "&span=" + encodeURIComponent(spanId),
              { credentials: "same-origin", headers: { "Accept": "text/html" } })
          .then(function (response) {
            if (!response.ok) throw new Error("HTTP " + response.status);
            return response.text();
          })
          .then(function (html) {
            if (panelAsked !== spanId) return; // another span was chosen meanwhile
            detail.innerHTML = html; // the UI's own autoescaped template (span_panel.html)
          })
          .catch(function (error) {
            detail.textContent = "the span could not be read (" + error.message + ")";
          });
      }, 120);
      const url = new URL(window.location.href);
      url.searchParams.set("span", spanId);
      window.history.replaceState(null, "", url.pathname + url.search + url.hash);
    }

    function select(i, withPanel) {
      if (i < 0 || i >= rows.length) return;
      selected = i;
      const top = i * ROW_H;
      if (top < body.scrollTop) body.scrollTop = top;
      else if (top + ROW_H > body.scrollTop + body.clientHeight) body.scrollTop = top + ROW_H - body.clientHeight;
      draw();
      body.setAttribute("aria-activedescendant", "wf-row-" + i);
      if (withPanel) showPanel(rows[i][col.span_id]);
    }

    body.addEventListener("scroll", function () { window.requestAnimationFrame(draw); });
    window.addEventListener("resize", draw);
    body.addEventListener("click", function (event) {
      const row = event.target.closest(".wf-row");
      if (row) {
        body.focus({ preventScroll: true });
        select(Number(row.dataset.row), true);
      }
    });
    body.addEventListener("keydown", function (event) {
      const keys = {
        ArrowDown: function () { select(Math.max(0, selected + 1), true); },
        ArrowUp: function () { select(Math.max(0, selected - 1), true); },
        PageDown: function () { select(Math.min(rows.length - 1, selected + 20), true); },
        PageUp: function () { select(Math.max(0, selected - 20), true); },
        Home: function () { select(0, true); },
        End: function () { select(rows.length - 1, true); },
        ArrowLeft: function () { pan(-0.2); },
        ArrowRight: function () { pan(0.2); },
        "+": function () { zoom(1 / ZOOM, selectedCenter()); },
        "=": function () { zoom(1 / ZOOM, selectedCenter()); },
        "-": function () { zoom(ZOOM, selectedCenter()); },
        "0": function () { setView(0, fullMs); },
        f: zoomToSpan,
      };
      const action = keys[event.key];
      if (action && !event.ctrlKey && !event.metaKey && !event.altKey) {
        event.preventDefault();
        action();
      }
    });

    function selectedCenter() {
      if (selected < 0) return undefined;
      const r = rows[selected];
      const center = r[col.start_ms] + r[col.duration_ms] / 2;
      return center >= view.t0 && center <= view.t1 ? center : undefined;
    }

    function onWheel(event) {
      if (!(event.ctrlKey || event.metaKey || event.altKey || event.currentTarget === axis)) return;
      event.preventDefault();
      zoom(event.deltaY > 0 ? ZOOM : 1 / ZOOM, msAt(event.clientX));
    }
    body.addEventListener("wheel", onWheel, { passive: false });
    axis.addEventListener("wheel", onWheel, { passive: false });

    let dragFrom = null;
    const band = document.createElement("div");
    band.className = "wf-band";
    band.hidden = true;
    axis.addEventListener("mousedown", function (event) {
      if (event.button !== 0) return;
      event.preventDefault();
      dragFrom = event.clientX;
    });
    window.addEventListener("mousemove", function (event) {
      if (dragFrom === null) return;
      const ticks = axis.querySelector(".wf-ticks");
      if (band.parentNode !== ticks) ticks.appendChild(band);
      const a = Math.min(dragFrom, event.clientX) - trackLeft(), b = Math.max(dragFrom, event.clientX) - trackLeft();
      band.hidden = false;
      band.style.left = a + "px";
      band.style.width = (b - a) + "px";
    });
    window.addEventListener("mouseup", function (event) {
      if (dragFrom === null) return;
      const from = dragFrom;
      dragFrom = null;
      band.hidden = true;
      if (Math.abs(event.clientX - from) > 4) setView(msAt(Math.min(from, event.clientX)), msAt(Math.max(from, event.clientX)));
    });

    document.getElementById("wf-zoom-in").addEventListener("click", function () { zoom(1 / ZOOM, selectedCenter()); });
    document.getElementById("wf-zoom-out").addEventListener("click", function () { zoom(ZOOM, selectedCenter()); });
    document.getElementById("wf-fit").addEventListener("click", function () { setView(0, fullMs); });
    document.getElementById("wf-zoom-span").addEventListener("click", zoomToSpan);

    function load(offset) {
      fetch(root.dataset.rows + "&offset=" + offset, { credentials: "same-origin", headers: { "Accept": "application/json" } })
        .then(function (response) {
          if (!response.ok) throw new Error("HTTP " + response.status);
          return response.json();
        })
        .then(function (page) {
          if (offset === 0) {
            page.columns.forEach(function (name, n) { col[name] = n; });
            fullMs = page.start_ns !== null ? Math.max((page.end_ns - page.start_ns) / 1e6, MIN_VIEW_MS) : 1;
            view = { t0: 0, t1: fullMs };
          }
          page.rows.forEach(function (r) { byId.set(r[col.span_id], rows.length); rows.push(r); });
          total = page.page.total;
          spacer.style.height = (rows.length * ROW_H) + "px";
          body.style.height = Math.min(MAX_BODY_PX, rows.length * ROW_H + 2) + "px"; // a short session: no blank
          const more = page.page.next_offset !== null;
          status.textContent = more ? rows.length + " of " + total + " spans loaded…"
            : total + " spans · " + formatMs(fullMs);
          root.dataset.loaded = more ? "partly" : "all";
          const wanted = root.dataset.selected;
          if (selected < 0 && wanted && byId.has(wanted)) {
            panelAsked = wanted; // the page shows its panel already
            select(byId.get(wanted), false);
          } else {
            draw();
          }
          if (more) load(page.page.next_offset);
        })
        .catch(function (error) {
          status.textContent = "the spans could not be read (" + error.message + ")";
        });
    }
    load(0);
  }

  document.addEventListener("DOMContentLoaded", function () {
    const root = document.getElementById("waterfall");
    if (root) Waterfall(root);
  });
})();
