// The Inbox's keys (issue 65; docs/workbench.md "Inbox"): j/k move, Enter opens (or confirms the
// approval shown), a approve, d deny, c claim, x check for a bulk step, / search, ? lists them,
// Escape cancels. Served from the workbench's own origin (the Content-Security-Policy allows
// 'self', no inline script and no eval). A key goes to the server by setting the value of the
// page's hidden field (a Bokeh TextInput with the class "inbox-keys") to the newest keys with their
// numbers, "12:j 13:k 14:Enter" (the server may merge two quick changes of one field into the last,
// so each change carries the keys before it; the server acts on each number once, in order). The
// server reads a key's name as data and ignores one it does not know. Keys typed into a field
// stay the field's; nothing here reads or writes the page's text.
(function () {
  "use strict";
  var SENT = { j: 1, k: 1, Enter: 1, a: 1, d: 1, c: 1, x: 1, "?": 1, Escape: 1 };
  var count = 0;
  var recent = [];  // the newest KEPT keys, "<number>:<key>"
  var KEPT = 32;

  function find(root, selector) {
    // The first element matching `selector` in `root` or any shadow root below it.
    var found = root.querySelector(selector);
    if (found) {
      return found;
    }
    var all = root.querySelectorAll("*");
    for (var i = 0; i < all.length; i += 1) {
      if (all[i].shadowRoot) {
        found = find(all[i].shadowRoot, selector);
        if (found) {
          return found;
        }
      }
    }
    return null;
  }

  function sink() {
    var docs = (window.Bokeh && window.Bokeh.documents) || [];
    for (var i = 0; i < docs.length; i += 1) {
      var models = Array.from(docs[i].all_models);
      for (var j = 0; j < models.length; j += 1) {
        var classes = models[j].css_classes || [];
        if (classes.indexOf("inbox-keys") >= 0) {
          return models[j];
        }
      }
    }
    return null;
  }

  function typing(event) {
    var path = event.composedPath ? event.composedPath() : [event.target];
    var target = path[0];
    if (!target || !target.tagName) {
      return null;
    }
    var tag = target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || target.isContentEditable ? target : null;
  }

  function inboxShown() {
    var list = find(document, ".inbox-holds");
    return list !== null && list.getClientRects().length > 0;
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.isComposing) {
      return;
    }
    var key = event.key;
    if (!SENT[key] && key !== "/") {
      return;
    }
    var field = typing(event);
    if (field) {
      if (key === "Escape") {
        field.blur();
      }
      return;
    }
    if (!inboxShown()) {
      return;
    }
    var model = sink();
    if (model === null) {
      return;
    }
    event.preventDefault();
    if (key === "/") {
      var host = find(document, ".inbox-search");
      var input = host && (host.shadowRoot ? host.shadowRoot.querySelector("input") : host.querySelector("input"));
      if (input) {
        input.focus();
        input.select();
      }
      return;
    }
    count += 1;
    recent.push(count + ":" + key);
    if (recent.length > KEPT) {
      recent.shift();
    }
    model.value = recent.join(" ");
  });
})();
