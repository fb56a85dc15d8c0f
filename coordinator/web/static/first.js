// The first thing the page runs, before its style sheet or anything else loads: the
// address it was opened with may hold a one-time code (#handoff=, from the redirect that
// spent the printed ?token=). It leaves the address bar and this history entry at once,
// and waits in a variable for app.js to trade it for the key (coordinator/web/guard.py).
"use strict";
window.specrunHandoff = (() => {
  const given = /^#handoff=([A-Za-z0-9_-]+)$/.exec(location.hash);
  if (location.hash || location.search) history.replaceState(null, "", location.pathname);
  return given ? given[1] : "";
})();
