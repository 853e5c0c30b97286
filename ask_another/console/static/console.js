// The ask-another console's only script: refresh the live part of a page (the element with
// data-live) by fetching its fragment every few seconds, paused while the tab is hidden.
// Without JavaScript the pages still work; they are only not refreshed.
(function () {
  "use strict";
  var every = 2000;
  function refresh(node) {
    if (document.hidden) { return; }
    if (node.contains(document.activeElement) && document.activeElement.tagName === "INPUT") {
      return; // someone is typing a reason: do not replace the form under them
    }
    fetch(node.getAttribute("data-live"), { credentials: "same-origin", cache: "no-store" })
      .then(function (response) {
        if (response.status === 303 || response.redirected) { location.reload(); return null; }
        return response.ok ? response.text() : null;
      })
      .then(function (html) {
        if (html !== null && html !== node.getAttribute("data-last")) {
          node.setAttribute("data-last", html);
          node.innerHTML = html;
        }
      })
      .catch(function () { /* the server restarts: try again next time */ });
  }
  document.addEventListener("DOMContentLoaded", function () {
    var nodes = document.querySelectorAll("[data-live]");
    nodes.forEach(function (node) {
      setInterval(function () { refresh(node); }, every);
    });
  });
})();
