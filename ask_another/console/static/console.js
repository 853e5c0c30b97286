// The ask-another console's only script: refresh the live part of a page (the element with
// data-live) by fetching its fragment every few seconds (the server's pace, data-poll-ms),
// paused while the tab is hidden. Not slower while nothing changes: the pace is just under the
// server's keep-alive, so each fetch reuses the connection the last one left open, and a slower
// one would find it closed and cost the server a new connection (three times a request).
// Without JavaScript the pages still work; they are only not refreshed.
(function () {
  "use strict";
  // A focused link counts too: replacing it would drop the keyboard user's place.
  var CONTROLS = { INPUT: true, BUTTON: true, SELECT: true, TEXTAREA: true, A: true };
  function watch(node, base) {
    var every = base;
    function next() { setTimeout(refresh, every); }
    function busy() {
      // Someone is typing in a form of it or pressing one of its buttons (a press focuses the
      // button): replacing it now would drop what they typed, or the click between its press
      // and its release, so the form would never be sent. Asked when the fresh part is there,
      // the moment it would replace the old one.
      var active = document.activeElement;
      return active !== null && node.contains(active) && CONTROLS[active.tagName] === true;
    }
    function refresh() {
      if (document.hidden) {
        next();
        return;
      }
      fetch(node.getAttribute("data-live"), { credentials: "same-origin", cache: "no-store" })
        .then(function (response) {
          if (response.redirected) { location.reload(); return null; } // logged out
          return response.ok ? response.text() : null;
        })
        .then(function (html) {
          if (html !== null && html !== node.getAttribute("data-last") && !busy()) {
            node.setAttribute("data-last", html);
            node.innerHTML = html;
            // The Approvals page's title counts what waits: a tab in the background says it.
            var titled = node.querySelector("[data-title]");
            if (titled !== null) { document.title = titled.getAttribute("data-title"); }
          }
          every = base;
          next();
        })
        .catch(function () { every = base * 3; next(); }); // the server restarts
    }
    next();
  }
  // A form with data-confirm (Kill this process) is sent only once the person confirms.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form && form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) { event.preventDefault(); }
  });
  document.addEventListener("DOMContentLoaded", function () {
    var base = parseInt(document.body.getAttribute("data-poll-ms"), 10) || 5000;
    document.querySelectorAll("[data-live]").forEach(function (node) { watch(node, base); });
  });
})();
