// quest's own script, the only one a page loads: it keeps an open page in step with the
// progress file. On each `progress` event from /events it fetches the same address again
// and swaps in the parts marked `data-live`; the rest of the page (an unfolded hint, the
// scroll position) stays as the learner left it.
(function () {
  "use strict";
  var source = document.body.getAttribute("data-events");
  if (!source || !window.EventSource || !window.fetch) {
    return;
  }
  var busy = false;
  var again = false;

  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html");
    fresh.querySelectorAll("[data-live][id]").forEach(function (part) {
      var old = document.getElementById(part.id);
      if (old) {
        old.replaceWith(document.importNode(part, true));
      }
    });
    var count = Number(document.body.getAttribute("data-refreshed") || "0") + 1;
    document.body.setAttribute("data-refreshed", String(count));
  }

  function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    fetch(location.href, { cache: "no-store" })
      .then(function (response) {
        return response.ok ? response.text().then(swap) : null;
      })
      .catch(function () {})
      .then(function () {
        busy = false;
        if (again) {
          again = false;
          refresh();
        }
      });
  }

  var events = new EventSource(source);
  events.addEventListener("progress", refresh);
})();
