// The turngate console's script. Everything shown comes from the JSON API and is put on the page with
// textContent: no markup is ever built from data (no innerHTML), so a file name or content holding
// markup shows as text. The session cookie authenticates the requests; a request that changes something
// carries the session's CSRF token (from /api/session) in X-CSRF-Token.
"use strict";

(function () {
  let csrf = "";
  let nextCall = null;
  let nextRecord = null;
  let lastTurnKey = undefined;
  let lastTurnBox = null;
  let shownQuestions = "";

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function status(text, kind) {
    const line = document.getElementById("status");
    line.textContent = text;
    line.className = kind || "";
  }

  async function api(path, options) {
    const response = await fetch(path, Object.assign({ credentials: "same-origin" }, options || {}));
    let body = null;
    try {
      body = await response.json();
    } catch (e) {
      body = { error: "unreadable answer (" + response.status + ")" };
    }
    return { ok: response.ok, status: response.status, body: body };
  }

  function time(ms) {
    if (typeof ms !== "number") return "";
    return new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC");
  }

  // ---- approvals ----

  function field(box, label, value) {
    const line = el("div", "field");
    line.appendChild(el("span", "label", label));
    line.appendChild(el("span", "value", value));
    box.appendChild(line);
  }

  function renderQuestion(question) {
    const request = question.request;
    const box = el("div", "call question");
    const head = el("div", "call-head");
    head.appendChild(el("span", "tool", request.tool));
    head.appendChild(el("span", "muted", request.id ? "call " + request.id : "no call ID"));
    head.appendChild(el("span", "muted", "asked " + time(question.asked_ms)));
    head.appendChild(el("span", "muted", "denied at " + time(question.deadline_ms) + " without an answer"));
    box.appendChild(head);
    const from = request.provenance;
    if (from) {
      const registry = from.source
        ? "installed from " + from.source + (from.signer ? ", signed by " + from.signer : ", unsigned by your choice")
        : from.origin;
      field(box, "tool", registry + " (SHA-256 " + from.sha256 + ")");
    }
    const because = {
      tool_asks: "the policy marks " + request.tool + " approval = \"ask\"",
      review: "every change is reviewed (--review)",
      network_asks: "the policy's network table for " + request.tool + " asks before this request",
    }[request.asked_because];
    if (because) field(box, "asked because", because);
    field(box, "input", request.input);
    if (request.paths && request.paths.length) {
      field(box, "paths", request.paths.map(function (p) { return p.path + " (" + p.access + ")"; }).join(", "));
    }
    if (request.network) {
      const n = request.network;
      field(box, "request", n.method + " " + n.url);
      field(box, "body", n.body_bytes + " bytes, SHA-256 " + n.body_sha256);
      if (typeof n.body_start === "string") field(box, "body starts", n.body_start);
    }
    if (request.changes) {
      const list = el("ul", "changes");
      for (const change of request.changes) {
        const item = el("li");
        item.appendChild(el("span", "kind", change.kind));
        item.appendChild(el("span", "path", change.path));
        list.appendChild(item);
      }
      box.appendChild(list);
      if (request.diff) {
        box.appendChild(renderDiff(request.diff, question.diff_hunks, question.diff_next, function (from) {
          return "/api/approvals/diff?digest=" + encodeURIComponent(question.digest) + "&from=" + from;
        }));
      }
    } else if (!request.network) {
      box.appendChild(el("p", "note", "asked before the call runs: it only reads"));
    }
    field(box, "digest", question.digest);
    const actions = el("div", "actions");
    for (const [label, approve] of [["Approve", true], ["Deny", false]]) {
      const button = el("button", approve ? "approve" : "deny", label);
      button.type = "button";
      button.addEventListener("click", function () {
        answer([{ digest: question.digest, approve: approve }], label.toLowerCase() + " " + request.tool);
      });
      actions.appendChild(button);
    }
    box.appendChild(actions);
    return box;
  }

  function renderQuestions(questions) {
    const area = document.getElementById("questions");
    area.replaceChildren();
    document.getElementById("approval-count").textContent = questions.length ? "(" + questions.length + ")" : "";
    if (!questions.length) {
      area.appendChild(el("p", "muted", "Nothing is waiting for an answer."));
      return;
    }
    // The root's questions by turn; a worker fleet's by the job that asked.
    const turns = new Map();
    for (const question of questions) {
      const turn = question.turn === null || question.turn === undefined ? "" : question.turn;
      const key = (question.fleet ? "job " : "turn ") + turn;
      if (!turns.has(key)) turns.set(key, []);
      turns.get(key).push(question);
    }
    for (const [key, group] of turns) {
      // A turn's questions in the turn's order (they may have been asked in another).
      const place = function (q) { return typeof q.position === "number" ? q.position : Infinity; };
      group.sort(function (a, b) { return (place(a) - place(b)) || (a.asked_ms - b.asked_ms); });
      const box = el("div", "turn");
      const head = el("div", "turn-head");
      const title = key === "turn " ? "Calls outside a turn"
        : group[0].fleet ? "Job " + group[0].turn + " (worker fleet)" : "Turn " + group[0].turn;
      head.appendChild(el("h2", null, title));
      if (group.length > 1) {
        for (const [label, approve] of [["Approve all " + group.length, true], ["Deny all " + group.length, false]]) {
          const button = el("button", approve ? "approve" : "deny", label);
          button.type = "button";
          button.addEventListener("click", function () {
            answer(group.map(function (q) { return { digest: q.digest, approve: approve }; }),
              label.toLowerCase() + " of " + (key === "turn " ? "the calls outside a turn" : key));
          });
          head.appendChild(button);
        }
      }
      box.appendChild(head);
      for (const question of group) box.appendChild(renderQuestion(question));
      area.appendChild(box);
    }
  }

  async function loadQuestions() {
    const answer = await api("/api/approvals");
    if (!answer.ok) {
      status(answer.body.error || "the approvals could not be read", "error");
      return;
    }
    const questions = answer.body.approvals;
    const damaged = answer.body.damaged || [];
    // Drawn again only when what waits changed, so nothing moves under the reader.
    const key = questions.map(function (q) { return q.digest; }).concat(damaged).join(",");
    if (key !== shownQuestions) {
      shownQuestions = key;
      renderQuestions(questions);
      for (const why of damaged) {
        document.getElementById("questions").appendChild(el("p", "damage", "cannot be answered: " + why));
      }
    }
  }

  async function answer(answers, what) {
    status(what + "...");
    const reply = await api("/api/approvals", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify({ answers: answers }),
    });
    if (reply.ok) {
      status("answered: " + what, "ok");
    } else {
      status("not answered: " + (reply.body.error || reply.status), "error");
    }
    shownQuestions = "";
    loadQuestions();
  }

  // ---- timeline ----

  function turnBox(turn) {
    const key = turn === null || turn === undefined ? null : turn;
    if (lastTurnBox && lastTurnKey === key) return lastTurnBox;
    const box = el("div", "turn");
    const head = el("div", "turn-head");
    head.appendChild(el("h2", null, key === null ? "Calls outside a turn" : "Turn " + key));
    if (key !== null) {
      const undoTurn = el("button", null, "Undo turn");
      undoTurn.type = "button";
      undoTurn.addEventListener("click", function () {
        undo({ turn: key }, "turn " + key);
      });
      head.appendChild(undoTurn);
    }
    box.appendChild(head);
    document.getElementById("calls").appendChild(box);
    lastTurnKey = key;
    lastTurnBox = box;
    return box;
  }

  function renderCall(call) {
    const box = el("div", "call" + (call.state === "undone" ? " undone" : ""));
    const head = el("div", "call-head");
    head.appendChild(el("span", "seq", "#" + call.seq));
    head.appendChild(el("span", "tool", call.tool));
    head.appendChild(el("span", "muted", call.call_id ? "call " + call.call_id : "no call ID"));
    head.appendChild(el("span", "muted", time(call.time_ms)));
    head.appendChild(el("span", "state", call.state));
    box.appendChild(head);
    if (call.damage) box.appendChild(el("p", "damage", call.damage));
    const list = el("ul", "changes");
    for (const change of call.changes) {
      const item = el("li");
      item.appendChild(el("span", "kind", change.kind));
      item.appendChild(el("span", "path", change.path));
      list.appendChild(item);
    }
    box.appendChild(list);
    const diffArea = el("div", "diffs");
    const actions = el("div", "actions");
    const showDiff = el("button", null, "Show diff");
    showDiff.type = "button";
    showDiff.addEventListener("click", function () {
      loadDiff(call.seq, diffArea, showDiff);
    });
    actions.appendChild(showDiff);
    if (call.state === "applied") {
      const undoButton = el("button", null, "Undo");
      undoButton.type = "button";
      undoButton.addEventListener("click", function () {
        undo({ seq: call.seq }, "call #" + call.seq);
      });
      actions.appendChild(undoButton);
    }
    box.appendChild(actions);
    box.appendChild(diffArea);
    turnBox(call.turn).appendChild(box);
  }

  // A diff comes from the server a page at a time (20 hunks, or less when they are long): a large diff
  // stays readable, and is neither sent nor drawn whole; the next page is a click away.
  const HUNKS_A_PAGE = 20;

  function heads(text) {
    return text.split("\n").filter(function (line) { return line.startsWith("@@"); }).length;
  }

  function appendLines(pre, text) {
    const lines = text.split("\n");
    if (lines[lines.length - 1] === "") lines.pop();
    for (const line of lines) {
      let cls = null;
      if (line.startsWith("@@")) cls = "diff-hunk";
      else if (line.startsWith("+") && !line.startsWith("+++")) cls = "diff-add";
      else if (line.startsWith("-") && !line.startsWith("---")) cls = "diff-del";
      pre.appendChild(el("span", cls, line + "\n"));
    }
  }

  // `first`: the first page's text; `hunks`: how many the diff has; `next`: the line the next page
  // starts at (null: none); `page(from)`: the address of the page from line `from`.
  function renderDiff(first, hunks, next, page) {
    const box = el("div", "diff-box");
    const pre = el("pre", "diff");
    box.appendChild(pre);
    appendLines(pre, first);
    let shown = heads(first);
    const more = el("button", "more", "");
    more.type = "button";
    function label() {
      const left = hunks - shown;
      more.hidden = next === null || next === undefined;
      more.textContent = left > 0
        ? "Show " + Math.min(left, HUNKS_A_PAGE) + " more hunks (" + left + " not shown)"
        : "Show the rest of this hunk";
    }
    more.addEventListener("click", async function () {
      more.disabled = true;
      const answer = await api(page(next));
      more.disabled = false;
      if (!answer.ok) {
        status(answer.body.error || "the rest of the diff could not be read", "error");
        return;
      }
      appendLines(pre, answer.body.diff);
      shown += heads(answer.body.diff);
      next = answer.body.next;
      label();
    });
    label();
    box.appendChild(more);
    return box;
  }

  async function loadDiff(seq, area, button) {
    if (area.childNodes.length) {
      area.replaceChildren();
      button.textContent = "Show diff";
      return;
    }
    const answer = await api("/api/diff?seq=" + encodeURIComponent(seq));
    if (!answer.ok) {
      status(answer.body.error || "the diff could not be read", "error");
      return;
    }
    answer.body.changes.forEach(function (change, index) {
      area.appendChild(el("div", "path", change.kind + " " + change.path));
      if (typeof change.diff === "string") {
        area.appendChild(change.diff
          ? renderDiff(change.diff, change.hunks, change.next, function (from) {
            return "/api/diff?seq=" + encodeURIComponent(seq) + "&change=" + index + "&from=" + from;
          })
          : el("p", "note", "no difference in content"));
      } else if (change.binary) {
        area.appendChild(el("p", "note", "binary content: not shown"));
      }
      if (change.before_note) {
        area.appendChild(el("p", "note", "before: " + change.before_note));
      }
      if (change.after_note) {
        area.appendChild(el("p", "note", "after: " + change.after_note));
      }
    });
    button.textContent = "Hide diff";
  }

  async function undo(target, what) {
    status("undoing " + what + "...");
    const answer = await api("/api/undo", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify(target),
    });
    if (answer.ok) {
      status("undone: " + answer.body.undone.map(function (s) { return "#" + s; }).join(", "), "ok");
      reloadCalls();
    } else {
      status("undo refused: " + (answer.body.error || answer.status), "error");
    }
  }

  async function loadCalls() {
    const query = nextCall === null ? "" : "?before=" + encodeURIComponent(nextCall);
    const answer = await api("/api/journal" + query);
    if (!answer.ok) {
      status(answer.body.error || "the journal could not be read", "error");
      return;
    }
    if (answer.body.total === 0) {
      document.getElementById("calls").appendChild(el("p", "muted", "No applied call in this root's journal."));
    }
    for (const call of answer.body.calls) renderCall(call);
    nextCall = answer.body.next_before;
    document.getElementById("older-calls").hidden = nextCall === null;
  }

  function reloadCalls() {
    document.getElementById("calls").replaceChildren();
    nextCall = null;
    lastTurnBox = null;
    lastTurnKey = undefined;
    loadCalls();
  }

  // ---- audit log ----

  function auditQuery() {
    const params = new URLSearchParams();
    const tool = document.getElementById("filter-tool").value.trim();
    const state = document.getElementById("filter-status").value;
    const since = document.getElementById("filter-since").value;
    const until = document.getElementById("filter-until").value;
    if (tool) params.set("tool", tool);
    if (state) params.set("status", state);
    if (since) params.set("since", String(new Date(since).getTime()));
    if (until) params.set("until", String(new Date(until).getTime()));
    if (nextRecord !== null) params.set("before", String(nextRecord));
    return params.toString();
  }

  function renderRecord(entry) {
    const record = entry.record;
    const row = el("tr");
    row.appendChild(el("td", null, time(record.time_ms)));
    row.appendChild(el("td", null, record.type));
    row.appendChild(el("td", null, record.type === "call" ? record.tool : record.provider));
    row.appendChild(el("td", null, record.type === "call" ? record.verdict : record.status));
    let detail = "";
    if (record.type === "call") {
      const parts = [];
      if (record.id) parts.push("call " + record.id);
      if (record.step) parts.push(record.step);
      if (record.reason) parts.push(record.reason);
      for (const change of record.changes || []) parts.push(change.kind + " " + change.path);
      detail = parts.join(" | ");
    } else {
      detail = (record.turn_id ? "turn " + record.turn_id + " | " : "") + (record.detail || "");
    }
    row.appendChild(el("td", null, detail));
    document.querySelector("#records tbody").appendChild(row);
  }

  async function loadRecords() {
    const answer = await api("/api/audit?" + auditQuery());
    if (!answer.ok) {
      status(answer.body.error || "the audit log could not be read", "error");
      return;
    }
    document.getElementById("audit-log-name").textContent = answer.body.log
      ? "From " + answer.body.log
      : "No audit log: start the console with --log FILE (the file run, call or mcp --log append to).";
    for (const entry of answer.body.records) renderRecord(entry);
    nextRecord = answer.body.next_before;
    document.getElementById("older-records").hidden = nextRecord === null;
  }

  function reloadRecords() {
    document.querySelector("#records tbody").replaceChildren();
    nextRecord = null;
    loadRecords();
  }

  // ---- tools ----

  async function loadTools() {
    const answer = await api("/api/tools");
    if (!answer.ok) {
      status(answer.body.error || "the tools could not be read", "error");
      return;
    }
    const body = document.querySelector("#tool-list tbody");
    body.replaceChildren();
    if (!answer.body.loaded) {
      const row = el("tr");
      row.appendChild(el("td", null, "No tools were loaded by this console."));
      body.appendChild(row);
      return;
    }
    for (const tool of answer.body.tools) {
      const row = el("tr");
      const name = el("td");
      name.appendChild(el("div", "tool", tool.name));
      name.appendChild(el("div", "muted", tool.description));
      row.appendChild(name);
      row.appendChild(el("td", null, tool.paths.map(function (p) { return p.pointer + " (" + p.access + ")"; }).join(", ") || "none"));
      row.appendChild(el("td", null, tool.network ? "may ask for network" : "none"));
      const origin = el("td");
      if (tool.registry) {
        const r = tool.registry;
        origin.appendChild(el("div", null, r.source || ""));
        origin.appendChild(el("div", "muted", "manifest " + (r.manifest || "")));
        origin.appendChild(el("div", "muted", r.signer ? "signed by " + r.signer : "installed unsigned, by your choice"));
        origin.appendChild(el("div", "muted", r.grants ? "grants accepted: " + r.grants : "no grants accepted: its calls are denied"));
      } else {
        origin.appendChild(el("div", null, tool.origin));
      }
      row.appendChild(origin);
      row.appendChild(el("td", "digest", tool.sha256));
      body.appendChild(row);
    }
  }

  // ---- tabs and start ----

  function show(which) {
    document.getElementById("approvals").hidden = which !== "approvals";
    document.getElementById("show-approvals").classList.toggle("active", which === "approvals");
    document.getElementById("timeline").hidden = which !== "timeline";
    document.getElementById("audit").hidden = which !== "audit";
    document.getElementById("tools").hidden = which !== "tools";
    document.getElementById("show-tools").classList.toggle("active", which === "tools");
    document.getElementById("show-timeline").classList.toggle("active", which === "timeline");
    document.getElementById("show-audit").classList.toggle("active", which === "audit");
  }

  async function start() {
    const session = await api("/api/session");
    if (!session.ok) {
      status(session.body.error || "not allowed", "error");
      return;
    }
    csrf = session.body.csrf;
    document.getElementById("root-line").textContent = "Root: " + session.body.root;
    document.getElementById("show-approvals").addEventListener("click", function () { show("approvals"); });
    document.getElementById("show-timeline").addEventListener("click", function () { show("timeline"); });
    document.getElementById("show-audit").addEventListener("click", function () { show("audit"); });
    document.getElementById("show-tools").addEventListener("click", function () { show("tools"); });
    document.getElementById("older-calls").addEventListener("click", loadCalls);
    document.getElementById("older-records").addEventListener("click", loadRecords);
    document.getElementById("audit-filter").addEventListener("submit", function (event) {
      event.preventDefault();
      reloadRecords();
    });
    loadQuestions();
    setInterval(loadQuestions, 1000);
    loadCalls();
    loadRecords();
    loadTools();
  }

  document.addEventListener("DOMContentLoaded", start);
})();
