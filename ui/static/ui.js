// tracefix web UI: the only script (loaded from /static; the CSP allows no inline script).
// Live job state: a table with data-poll="URL" (the JSON API's GET /api/v1/jobs, read with the
// UI's cookie) is refreshed every 2 s while any of its jobs is queued or running (a table with
// data-refresh="page" reloads its page once they have all finished, to show what they wrote). Each poll asks
// for those jobs only (job_id=...), so it stays as small as the table however many jobs the store holds.
"use strict";

(function () {
  const POLL_MS = 2000;
  const UNFINISHED = new Set(["queued", "running"]);

  function setText(cell, text) {
    if (cell) cell.textContent = text || "";
  }

  // as the pages' `brief` filter (ui/views.py): one line, a long one cut between words with an ellipsis
  function brief(text, limit) {
    text = String(text || "").split(/\s+/).filter(Boolean).join(" ");
    if (text.length <= limit) return text;
    let head = text.slice(0, limit - 1);
    const space = head.lastIndexOf(" ");
    if (!/\s/.test(text.charAt(limit - 1)) && space >= Math.floor((limit - 1) / 2)) head = head.slice(0, space);
    return head.replace(/[ ,;:]+$/, "") + "\u2026";
  }

  function when(iso) {
    return iso ? iso.replace("T", " ").slice(0, 19) : "—";
  }

  function update(table, jobs) {
    const byId = new Map(jobs.map(function (job) { return [job.job_id, job]; }));
    let unfinished = 0;
    let changed = false;
    table.querySelectorAll("tr[data-job-id]").forEach(function (row) {
      const job = byId.get(row.dataset.jobId);
      if (!job) return;
      const badge = row.querySelector(".job-state");
      if (badge && badge.textContent !== job.state) {
        badge.textContent = job.state;
        badge.className = "badge job-state job-" + job.state;
        changed = true;
      }
      setText(row.querySelector(".job-finished"), when(job.finished_at));
      setText(row.querySelector(".job-worker"), job.worker || "—");
      setText(row.querySelector(".job-error"), job.error ? brief(job.error, 200) : "");
      if (UNFINISHED.has(job.state)) unfinished += 1;
    });
    return { unfinished: unfinished, changed: changed };
  }

  // text typed into one of the page's forms, which a reload would lose
  function typing() {
    return Array.from(document.querySelectorAll("input[type=text], input[type=number], textarea"))
      .some(function (field) { return field.value !== ""; });
  }

  function watch(table) {
    const note = document.getElementById("live-state");
    function unfinishedShown() {
      return Array.from(table.querySelectorAll(".job-state")).some(function (b) { return UNFINISHED.has(b.textContent); });
    }
    if (!unfinishedShown()) return;
    if (note) note.hidden = false;
    function pollUrl() {
      const url = new URL(table.dataset.poll, window.location.origin);
      let asked = 0;
      table.querySelectorAll("tr[data-job-id]").forEach(function (row) {
        const badge = row.querySelector(".job-state");
        if (badge && UNFINISHED.has(badge.textContent)) {
          url.searchParams.append("job_id", row.dataset.jobId);
          asked += 1;
        }
      });
      url.searchParams.set("limit", String(Math.max(asked, 1)));
      return url.pathname + url.search;
    }
    function poll() {
      fetch(pollUrl(), { credentials: "same-origin", headers: { "Accept": "application/json" } })
        .then(function (response) {
          if (!response.ok) throw new Error("HTTP " + response.status);
          return response.json();
        })
        .then(function (body) {
          const state = update(table, body.jobs || []);
          table.dataset.polled = String(Number(table.dataset.polled || "0") + 1);
          if (state.unfinished > 0) {
            window.setTimeout(poll, POLL_MS);
          } else if (table.dataset.refresh === "page" && !typing()) {
            // the results the jobs wrote (hypotheses, replays, the next job) are parts of the page
            if (note) note.textContent = "every job has finished: showing their results";
            window.location.reload();
          } else if (note) {
            note.textContent = table.dataset.refresh === "page"
              ? "every job has finished: reload the page for their results (not done for you while you type)"
              : "every job has finished";
          }
        })
        .catch(function (error) {
          if (note) note.textContent = "job states could not be refreshed (" + error.message + ")";
        });
    }
    window.setTimeout(poll, POLL_MS);
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("table[data-poll]").forEach(watch);
  });
})();
