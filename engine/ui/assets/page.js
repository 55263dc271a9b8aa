// While the query runs, reload the page's content every two seconds: fetch the
// same page and swap its <main>, so the reader keeps their scroll position.
(function () {
  "use strict";
  var every = 2000;
  function live() { return document.body.getAttribute("data-live") === "true"; }
  function refresh() {
    if (!live()) { return; }
    fetch(location.pathname, { cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var next = doc.querySelector("main"), here = document.querySelector("main");
        if (next && here) { here.replaceWith(next); }
        document.body.setAttribute("data-live", doc.body.getAttribute("data-live"));
        document.body.setAttribute("data-status", doc.body.getAttribute("data-status"));
      })
      .catch(function () {
        // The run ended and took the server with it: say so and stop asking.
        document.body.setAttribute("data-live", "false");
        var s = document.querySelector("#status");
        if (s) { s.textContent = "gone (the server stopped)"; s.className = "badge"; }
      })
      .finally(function () { if (live()) { setTimeout(refresh, every); } });
  }
  setTimeout(refresh, every);
}());
