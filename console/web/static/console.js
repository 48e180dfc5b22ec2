// Live updates for the workloads page: one EventSource per tab on the
// console's /watch, which is the gateway's informer-fed stream (no
// polling). Rows are added, updated or removed in place.
"use strict";
(function () {
  var live = document.getElementById("live");
  var table = document.getElementById("workloads");
  if (!live || !table || !window.EventSource) { return; }
  var body = table.tBodies[0];
  function cell(tr, i, text, cls) {
    var td = tr.cells[i] || tr.insertCell(i);
    td.textContent = text;
    if (cls) { td.className = cls; }
  }
  var watch = live.getAttribute("data-watch");
  var base = watch.slice(0, watch.indexOf("/watch"));
  function link(tr, w) {
    var td = tr.cells[1] || tr.insertCell(1);
    var a = document.createElement("a");
    a.href = base + "/workloads/" + encodeURIComponent(w.kind) + "/" + encodeURIComponent(w.name) +
      "?namespace=" + encodeURIComponent(w.namespace);
    a.textContent = w.name;
    td.replaceChildren(a);
  }
  function age(created) {
    var s = Math.max(0, (Date.now() - Date.parse(created)) / 1000);
    if (s < 60) { return Math.floor(s) + "s"; }
    if (s < 3600) { return Math.floor(s / 60) + "m"; }
    if (s < 172800) { return Math.floor(s / 3600) + "h"; }
    return Math.floor(s / 86400) + "d";
  }
  // clip is the template's (console/expiry.go clipAt): at most CLIP
  // characters, the last an ellipsis.
  var CLIP = 80;
  function clip(s) {
    var r = Array.from(s || "");
    return r.length <= CLIP ? s : r.slice(0, CLIP - 1).join("") + "\u2026";
  }
  function el(tag, cls, text) {
    var n = document.createElement(tag);
    if (cls) { n.className = cls; }
    n.textContent = text;
    return n;
  }
  // The last event as the list renders it: "not allowed" when the
  // gateway hides events from this identity, "none" without one.
  function lastEvent(tr, hidden, ev) {
    var td = tr.cells[6] || tr.insertCell(6);
    if (hidden) { td.textContent = "not allowed"; return; }
    if (!ev) { td.textContent = "none"; return; }
    var msg = el("span", "", clip(ev.message));
    msg.title = ev.message;
    td.replaceChildren(el("span", "event-" + ev.type, ev.reason), ": ", msg, " ",
      el("small", "", age(ev.time) + " ago"));
  }
  function apply(type, e) {
    var d = JSON.parse(e.data), w = d.workload;
    var id = "w-" + w.kind + "-" + w.name;
    var tr = document.getElementById(id);
    if (type === "DELETED") { if (tr) { tr.remove(); } return; }
    if (!tr) { tr = body.insertRow(-1); tr.id = id; }
    cell(tr, 0, w.kind); link(tr, w);
    cell(tr, 2, w.ready || "Unknown", "ready-" + (w.ready || "Unknown"));
    cell(tr, 3, w.reason || ""); cell(tr, 4, w.image || "");
    cell(tr, 5, age(w.created));
    lastEvent(tr, d.eventsHidden, w.lastEvent);
    var empty = document.getElementById("empty");
    if (empty) { empty.remove(); }
  }
  var es = new EventSource(watch);
  ["ADDED", "MODIFIED", "DELETED"].forEach(function (t) {
    es.addEventListener(t, function (e) { apply(t, e); });
  });
  es.onopen = function () { live.textContent = "Live updates: on"; };
  es.onerror = function () { live.textContent = "Live updates: reconnecting"; };
}());

// Live updates for the rollouts page. The state store has no watch: the
// console reads it once for all open pages and says when its version
// changes (/rollouts/watch); the page then fetches itself again, so what
// it shows (and the buttons RBAC allows) is rendered by the server as on
// a reload, and swaps in the new content. The confirmation page has no
// version and is left alone.
(function () {
  var live = document.getElementById("rollouts-live");
  if (!live || !window.EventSource || !window.fetch || !window.DOMParser) { return; }
  var version = live.getAttribute("data-version"), latest = version, busy = false;
  var es = new EventSource(live.getAttribute("data-watch"));
  function off() {
    es.close();
    live.textContent = "Live updates: off (reload the page)";
  }
  function refresh() {
    if (busy || latest === version) { return; }
    busy = true;
    fetch(location.pathname, { credentials: "same-origin" }).then(function (r) {
      if (!r.ok) { throw new Error("HTTP " + r.status); }
      return r.text();
    }).then(function (html) {
      var doc = new DOMParser().parseFromString(html, "text/html");
      var next = doc.getElementById("rollout-content");
      var cur = document.getElementById("rollout-content");
      var nl = doc.getElementById("rollouts-live");
      if (!next || !cur || !nl) { throw new Error("the page has no rollout"); }
      cur.replaceWith(document.adoptNode(next));
      version = nl.getAttribute("data-version");
      busy = false;
      refresh();
    }).catch(function () { busy = false; off(); });
  }
  es.addEventListener("version", function (e) { latest = e.data; refresh(); });
  es.onopen = function () { live.textContent = "Live updates: on"; };
  es.onerror = function () { live.textContent = "Live updates: reconnecting"; };
}());
