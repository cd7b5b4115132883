"""The app's HTML, CSS and JavaScript: server-rendered pages, a little plain JavaScript, no build step.

Every text from a trace or a user passes :func:`html.escape` on its way into a page, and the pages
run no inline script (the Content-Security-Policy the app sends allows only ``/static/annotate.js``),
so a step that holds ``<script>`` is shown as text.
"""

from __future__ import annotations

import json
from html import escape

from prmkit.annotate._store import FLAGS

__all__ = ["CSS", "SCRIPT", "login_page", "label_page", "message_page", "admin_page"]

CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 60rem; padding: 0 1rem 4rem; color: #222; }
header { display: flex; gap: 1rem; align-items: center; border-bottom: 1px solid #ddd; padding: .6rem 0; }
header .who { margin-left: auto; color: #555; }
pre { white-space: pre-wrap; word-wrap: break-word; font: inherit; margin: 0; }
.problem { background: #f6f6f2; padding: .8rem 1rem; border-radius: 6px; margin: 1rem 0; }
.answer { color: #555; margin-top: .5rem; }
ol.steps { padding-left: 0; list-style: none; counter-reset: step; }
li.step { display: grid; grid-template-columns: 2.5rem 1fr auto; gap: .6rem; align-items: start;
          padding: .55rem .6rem; border: 2px solid transparent; border-radius: 6px; margin: .2rem 0; }
li.step::before { counter-increment: step; content: counter(step); color: #888; text-align: right; }
li.step.current { border-color: #4a7bd0; background: #f3f7ff; }
li.step.skipped { opacity: .4; }
li.step[data-value="1"] .text { border-left: 4px solid #2a9d4b; padding-left: .4rem; }
li.step[data-value="0"] .text { border-left: 4px solid #c9a227; padding-left: .4rem; }
li.step[data-value="-1"] .text { border-left: 4px solid #c8372d; padding-left: .4rem; }
.rate button { min-width: 2.6rem; border: 1px solid #bbb; background: #fff; border-radius: 4px; cursor: pointer; }
li.step[data-value="-1"] button[data-value="-1"] { background: #c8372d; color: #fff; }
li.step[data-value="0"] button[data-value="0"] { background: #c9a227; color: #fff; }
li.step[data-value="1"] button[data-value="1"] { background: #2a9d4b; color: #fff; }
.help { color: #666; font-size: 13px; }
.status { min-height: 1.4em; color: #555; }
.status.error { color: #c8372d; }
textarea { width: 100%; min-height: 3rem; }
table { border-collapse: collapse; } td, th { border-bottom: 1px solid #ddd; padding: .25rem .6rem; text-align: left; }
"""

SCRIPT = r"""
(function () {
  "use strict";
  var body = document.body;
  if (!body.dataset.item) { return; }
  var item = Number(body.dataset.item), csrf = body.dataset.csrf;
  var steps = Array.prototype.slice.call(document.querySelectorAll("li.step"));
  var stop = document.getElementById("stop-first-wrong");
  var status = document.getElementById("status");
  var traceStart = Date.now() - 1000 * Number(body.dataset.traceSeconds || 0);
  var shownAt = Date.now(), current = 0;
  stop.checked = localStorage.getItem("prmkit-annotate-stop") === "1";
  function traceSeconds() { return (Date.now() - traceStart) / 1000; }
  function say(text, error) { status.textContent = text; status.className = "status" + (error ? " error" : ""); }
  function firstWrong() {
    for (var i = 0; i < steps.length; i++) { if (steps[i].dataset.value === "-1") { return i; } }
    return -1;
  }
  function refresh() {
    var wrong = stop.checked ? firstWrong() : -1;
    steps.forEach(function (li, i) {
      li.classList.toggle("current", i === current);
      li.classList.toggle("skipped", wrong >= 0 && i > wrong);
    });
  }
  function focusStep(i) {
    if (i < 0 || i >= steps.length) { return; }
    current = i; shownAt = Date.now(); refresh();
    steps[i].scrollIntoView({block: "nearest"});
  }
  function complete() {
    var wrong = stop.checked ? firstWrong() : -1, last = wrong >= 0 ? wrong : steps.length - 1;
    for (var i = 0; i <= last; i++) { if (steps[i].dataset.value === undefined) { return false; } }
    return true;
  }
  function rate(i, value) {
    var li = steps[i], seconds = (Date.now() - shownAt) / 1000;
    say("saving step " + (i + 1) + " ...");
    fetch("/api/rate", {method: "POST", credentials: "same-origin",
                        headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
                        body: JSON.stringify({item: item, step: i, value: value, seconds: seconds,
                                              trace_seconds: traceSeconds()})})
      .then(function (r) { return r.json().then(function (j) { return [r, j]; }); })
      .then(function (rj) {
        if (!rj[0].ok) { say("not saved: " + rj[1].error, true); return; }
        li.dataset.value = String(value);
        say("saved step " + (i + 1));
        if (stop.checked && value === -1) { refresh(); document.getElementById("note").focus(); return; }
        if (i + 1 < steps.length) { focusStep(i + 1); } else { refresh(); }
        if (complete()) { say("all steps rated: add a note if you like, then Finish (Enter)"); }
      })
      .catch(function (e) { say("not saved (" + e + "): rate the step again", true); });
  }
  steps.forEach(function (li, i) {
    li.addEventListener("click", function (ev) {
      var b = ev.target.closest("button[data-value]");
      if (b) { current = i; rate(i, Number(b.dataset.value)); } else { focusStep(i); }
    });
  });
  stop.addEventListener("change", function () {
    localStorage.setItem("prmkit-annotate-stop", stop.checked ? "1" : "0"); refresh();
  });
  document.getElementById("finish").addEventListener("submit", function () {
    document.getElementById("trace-seconds").value = String(traceSeconds());
  });
  document.addEventListener("keydown", function (ev) {
    var tag = (ev.target.tagName || "").toLowerCase();
    var typing = tag === "textarea" || tag === "select" || (tag === "input" && ev.target.type !== "checkbox");
    if (typing || ev.ctrlKey || ev.metaKey || ev.altKey) { return; }
    var values = {"1": -1, "2": 0, "3": 1};
    if (ev.key in values) { ev.preventDefault(); rate(current, values[ev.key]); }
    else if (ev.key === "ArrowDown" || ev.key === "ArrowRight") { ev.preventDefault(); focusStep(current + 1); }
    else if (ev.key === "ArrowUp" || ev.key === "ArrowLeft") { ev.preventDefault(); focusStep(current - 1); }
    else if (ev.key === "Enter" && complete()) { ev.preventDefault(); document.getElementById("finish").requestSubmit(); }
  });
  var first = steps.findIndex(function (li) { return li.dataset.value === undefined; });
  focusStep(first < 0 ? 0 : first);
})();
"""


def _doc(title: str, body: str, *, attrs: str = "", user: str | None = None, admin: bool = False,
         csrf: str | None = None) -> str:
    nav = ""
    if user is not None:
        nav = ('<a href="/next">next trace</a>' + ('<a href="/admin">admin</a>' if admin else "")
               + f'<span class="who">{escape(user)}</span>'
               f'<form method="post" action="/logout"><input type="hidden" name="csrf" value="{escape(csrf or "")}">'
               '<button>log out</button></form>')
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)} - prmkit annotate</title>"
            "<link rel=\"stylesheet\" href=\"/static/annotate.css\"></head>"
            f"<body{attrs}><header><strong>prmkit annotate</strong>{nav}</header>{body}"
            "<script src=\"/static/annotate.js\"></script></body></html>")


def login_page(csrf: str, message: str | None = None) -> str:
    note = f'<p class="status error">{escape(message)}</p>' if message else ""
    return _doc("log in", f"<h1>Log in</h1>{note}<form method=\"post\" action=\"/login\">"
                f"<input type=\"hidden\" name=\"csrf\" value=\"{escape(csrf)}\">"
                "<label>Token <input type=\"password\" name=\"token\" id=\"token\" autofocus "
                "autocomplete=\"off\" size=\"40\"></label> <button id=\"login\">Log in</button></form>"
                "<p class=\"help\">Your token came from <code>prmkit annotate add-user</code>.</p>")


def message_page(title: str, text: str, *, user: str | None = None, admin: bool = False,
                 csrf: str | None = None) -> str:
    return _doc(title, f"<h1>{escape(title)}</h1><p>{escape(text)}</p>", user=user, admin=admin, csrf=csrf)


def label_page(*, item_id: int, trace_id: str, problem: str, answer: str | None, steps: list[str],
               ratings: dict[int, int], note: str | None, flag: str | None, trace_seconds: float,
               user: str, admin: bool, csrf: str, remaining: int) -> str:
    """The labeling page of one trace: the problem, its steps with their ratings so far, the note."""
    items = []
    for i, text in enumerate(steps):
        value = f' data-value="{ratings[i]}"' if i in ratings else ""
        items.append(f'<li class="step" id="step-{i}" data-step="{i}"{value}><pre class="text">{escape(text)}</pre>'
                     '<span class="rate"><button type="button" data-value="-1" title="wrong (key 1)">&minus;1</button> '
                     '<button type="button" data-value="0" title="okay (key 2)">0</button> '
                     '<button type="button" data-value="1" title="right (key 3)">+1</button></span></li>')
    answer_html = (f'<div class="answer">Reference answer: <strong id="answer">{escape(answer)}</strong></div>'
                   if answer is not None else "")
    flags = "".join(f'<option value="{f}"{" selected" if f == flag else ""}>{f.replace("_", " ")}</option>'
                    for f in FLAGS)
    body = (f'<p class="help">Trace <code>{escape(trace_id)}</code>; {remaining} more in your queue after this one. '
            "Keys: <kbd>1</kbd> wrong (&minus;1), <kbd>2</kbd> okay (0), <kbd>3</kbd> right (+1); "
            "<kbd>&uarr;</kbd>/<kbd>&darr;</kbd> move; <kbd>Enter</kbd> finish.</p>"
            f'<section class="problem"><pre id="problem">{escape(problem)}</pre>{answer_html}</section>'
            f'<ol class="steps">{"".join(items)}</ol>'
            '<label><input type="checkbox" id="stop-first-wrong"> Stop at the first wrong step '
            "(the steps after it are left unrated)</label>"
            '<p class="status" id="status" role="status"></p>'
            f'<form id="finish" method="post" action="/label/{item_id}/finish">'
            f'<input type="hidden" name="csrf" value="{escape(csrf)}">'
            '<input type="hidden" name="trace_seconds" id="trace-seconds" value="0">'
            f'<label>Note (optional)<textarea name="note" id="note">{escape(note or "")}</textarea></label>'
            f'<label>Flag the problem as <select name="flag" id="flag"><option value="">(no flag)</option>{flags}'
            '</select></label> <button id="finish-button">Finish</button></form>')
    attrs = (f' data-item="{item_id}" data-csrf="{escape(csrf)}" data-trace-seconds="{trace_seconds:.1f}"')
    return _doc(f"trace {trace_id}", body, attrs=attrs, user=user, admin=admin, csrf=csrf)


def admin_page(lines: list[str], summary: dict, runs: list[dict], *, user: str, csrf: str) -> str:
    """Progress, agreement and cost (the lines of :class:`AnnotationSummary`) and the queue runs."""
    people = "".join(
        f"<tr><td>{escape(a['name'])}</td><td>{a['traces_done']}</td><td>{a['labels']}</td>"
        f"<td>{a['step_seconds'] / max(a['labels'], 1):.1f}</td><td>{a['flagged']}</td></tr>"
        for a in summary["annotators"])
    queues = "".join(f"<tr><td>{escape(r['time'])}</td><td>{escape(r['strategy'])}</td><td>{r['items']}</td>"
                     f"<td><code>{escape(json.dumps(r['args'], sort_keys=True))}</code></td></tr>" for r in runs)
    body = ("<h1>Progress, agreement and cost</h1>"
            + "".join(f"<p>{escape(x)}</p>" for x in lines[:3])
            + "<h2>Annotators</h2><table><tr><th>name</th><th>traces done</th><th>step labels</th>"
            f"<th>s per label</th><th>flagged</th></tr>{people}</table>"
            "<h2>Queue runs</h2><table><tr><th>time</th><th>strategy</th><th>items</th><th>options</th></tr>"
            f"{queues}</table>")
    return _doc("admin", body, user=user, admin=True, csrf=csrf)
