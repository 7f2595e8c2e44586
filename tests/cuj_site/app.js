// The fixture's "app": a session cookie and storage items, spans like the shop's app.js, a traced fetch.
(function () {
  "use strict";
  if (!document.cookie.includes("fixture_session=")) {
    document.cookie = "fixture_session=s3ss10n; path=/";
  }
  localStorage.setItem("fixture.key", "local-value");
  window.opsbench = window.opsbench || {spans: []};
  const hex = n => Array.from(crypto.getRandomValues(new Uint8Array(n)), b => b.toString(16).padStart(2, "0")).join("");
  function record(span) {
    window.opsbench.spans.push(span);
    const kept = JSON.parse(sessionStorage.getItem("opsbench.spans") || "[]");
    kept.push(span);
    sessionStorage.setItem("opsbench.spans", JSON.stringify(kept.slice(-200)));
  }
  window.fixtureRecord = record;
  const load = {traceId: hex(16), spanId: hex(8), parentSpanId: null, name: "documentLoad", kind: "internal",
                startTime: Date.now(), endTime: Date.now(), attributes: {page: location.pathname}, status: "ok"};
  record(load);

  const status = document.querySelector('[data-testid="api-status"]');
  if (status) {
    const traceId = hex(16), spanId = hex(8), start = Date.now();
    fetch("/api/echo", {method: "POST", headers: {"content-type": "application/json", "x-shop-user": "fixture-user",
                                                  "traceparent": "00-" + traceId + "-" + spanId + "-01"},
                        body: JSON.stringify({hello: "world", answer: 42})})
      .then(r => r.json().then(body => ({r, body})))
      .then(({r, body}) => {
        status.textContent = "ok " + body.echo.answer;
        status.dataset.amount = String(body.echo.answer);
        record({traceId, spanId, parentSpanId: load.spanId, name: "POST /api/echo", kind: "client", startTime: start,
                endTime: Date.now(), attributes: {"http.method": "POST", "http.url": "/api/echo",
                                                  "http.status_code": r.status, page: location.pathname},
                status: "ok"});
      });
  }
  const go = document.querySelector('[data-testid="go"]');
  if (go) {
    go.addEventListener("click", () => {
      const qty = document.querySelector('[data-testid="qty"]').value;
      setTimeout(() => {
        document.querySelector('[data-testid="go-status"]').textContent = "Added " + qty;
      }, 300);
    });
  }
})();
