// app.js: loaded first on every page (page scripts come after it and use the functions below).
// It owns the browser session, the currency switch, the cart count in the header and the browser's
// tracing: tracedFetch() sends a W3C traceparent so the backend's spans join the browser's trace, and
// every browser span is kept in window.opsbench.spans (and sessionStorage) where journeys can read it.
"use strict";

const SPANS_KEY = "opsbench.spans";
const MAX_SPANS = 200;
const FETCH_TIMEOUT_MS = 15000; // above the frontend's own 10 s checkout timeout: its error wins
const COOKIE_ATTRS = "; path=/; max-age=31536000; SameSite=Lax";
const USER_ID = /^[A-Za-z0-9._@-]{1,100}$/; // what the cart service accepts as a user id

function randomHex(bytes) {
  const buf = new Uint8Array(bytes);
  crypto.getRandomValues(buf);
  return Array.from(buf, (b) => b.toString(16).padStart(2, "0")).join("");
}

function readCookie(name) {
  for (const part of document.cookie.split(";")) {
    const [key, ...rest] = part.trim().split("=");
    if (key === name) return rest.join("="); // our values (hex ids, currency codes) need no decoding
  }
  return "";
}

function byTestId(testid) {
  return document.querySelector(`[data-testid="${testid}"]`);
}

// Sets the text of a status or alert element; an element without text stays hidden.
function showText(testid, text) {
  const el = byTestId(testid);
  el.textContent = text;
  el.hidden = !text;
}

function formatMoney(amount, currency) {
  return amount.toFixed(2) + " " + currency;
}

// -- session and currency ------------------------------------------------------------------
// The session id is the API's user: the cookie, else the localStorage copy (a cleared cookie keeps
// the cart), else a new random id.
function loadSession() {
  let id = readCookie("shop_session") || localStorage.getItem("shop.session") || "";
  if (!USER_ID.test(id)) id = randomHex(12);
  if (readCookie("shop_session") !== id) document.cookie = "shop_session=" + id + COOKIE_ATTRS;
  localStorage.setItem("shop.session", id);
  return id;
}

const session = loadSession();

function sessionId() {
  return session;
}

// The server rendered the page in this currency (query, else cookie, else USD).
function currentCurrency() {
  return document.body.dataset.currency || "USD";
}

function setCurrency(code) {
  document.cookie = "shop_currency=" + code + COOKIE_ATTRS;
  localStorage.setItem("shop.currency", code);
  // reload without ?currency=, which would win over the cookie on the server
  const url = new URL(location.href);
  url.searchParams.delete("currency");
  location.assign(url.href);
}

// The header's count is the cart as last seen by this browser (product, cart and checkout pages
// update it), so loading a page costs no extra call to the cart service.
function setCartCount(items) {
  const count = items.reduce((sum, item) => sum + item.quantity, 0);
  localStorage.setItem("shop.cartCount", String(count));
  byTestId("cart-count").textContent = String(count);
}

// -- browser spans ---------------------------------------------------------------------------
function loadSpans() {
  try {
    const spans = JSON.parse(sessionStorage.getItem(SPANS_KEY) || "[]");
    return Array.isArray(spans) ? spans : [];
  } catch (err) {
    return [];
  }
}

window.opsbench = window.opsbench || {};
window.opsbench.spans = loadSpans(); // the spans of earlier pages of this tab come first

// A span joins its parent's trace, or starts a new one. kind: client | interaction | documentLoad.
function startSpan(name, kind, parent) {
  return {
    traceId: parent ? parent.traceId : randomHex(16),
    spanId: randomHex(8),
    parentSpanId: parent ? parent.spanId : "",
    name: name,
    kind: kind,
    startTime: Date.now(),
    endTime: null,
    attributes: { page: document.body.dataset.page },
    status: "ok",
    error: "",
  };
}

// Ends a span (an error message makes it an error) and records it, persisted so it survives navigation.
function endSpan(span, error) {
  span.endTime = Date.now();
  if (error) {
    span.status = "error";
    span.error = error;
  }
  const spans = window.opsbench.spans;
  spans.push(span);
  if (spans.length > MAX_SPANS) spans.splice(0, spans.length - MAX_SPANS);
  try {
    sessionStorage.setItem(SPANS_KEY, JSON.stringify(spans));
  } catch (err) {
    // storage full or disabled: the spans stay in memory
  }
}

// A user action; the fetches it makes pass {parent: span} so they become its children.
async function interaction(name, action) {
  const span = startSpan(name, "interaction", null);
  try {
    const result = await action(span);
    endSpan(span, "");
    return result;
  } catch (err) {
    endSpan(span, err.message);
    throw err;
  }
}

// The shop's API answers errors as JSON {"error": ..., "service": ...}; anything else by its status.
async function errorMessage(resp) {
  try {
    const body = await resp.json();
    if (body && typeof body.error === "string") return body.error;
  } catch (err) {
    // not JSON (a proxy's error page, say)
  }
  return "HTTP " + resp.status;
}

// fetch() with a client span. options as for fetch, plus `parent` (an interaction span).
async function tracedFetch(name, url, options) {
  const init = Object.assign({}, options);
  const span = startSpan(name, "client", init.parent);
  delete init.parent;
  span.attributes["http.method"] = (init.method || "GET").toUpperCase();
  span.attributes["http.url"] = new URL(url, location.href).href;
  span.attributes["http.status_code"] = 0; // stays 0 when no response arrives
  init.headers = new Headers(init.headers);
  init.headers.set("traceparent", `00-${span.traceId}-${span.spanId}-01`);
  init.headers.set("x-shop-user", sessionId());
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), FETCH_TIMEOUT_MS);
  init.signal = controller.signal;
  try {
    const resp = await fetch(url, init);
    span.attributes["http.status_code"] = resp.status;
    endSpan(span, resp.ok ? "" : await errorMessage(resp.clone()));
    return resp;
  } catch (err) {
    const message = err.name === "AbortError" ? `no answer within ${FETCH_TIMEOUT_MS / 1000} s` : err.message;
    endSpan(span, message);
    throw new Error(message);
  } finally {
    clearTimeout(timer);
  }
}

// tracedFetch, then the JSON body; a failed request throws an Error with the API's message.
async function fetchJSON(name, url, options) {
  const resp = await tracedFetch(name, url, options);
  if (!resp.ok) throw new Error(await errorMessage(resp));
  return resp.json();
}

// The page load, as a child of the server span that rendered the page (its <meta name="traceparent">).
function recordDocumentLoad() {
  const meta = document.querySelector('meta[name="traceparent"]');
  const parts = meta ? meta.content.split("-") : [];
  const parent = parts.length === 4 ? { traceId: parts[1], spanId: parts[2] } : null;
  const span = startSpan("documentLoad", "documentLoad", parent);
  span.startTime = Math.round(performance.timeOrigin);
  span.attributes["http.method"] = "GET";
  span.attributes["http.url"] = location.href;
  const nav = performance.getEntriesByType("navigation")[0];
  if (nav && nav.responseStatus) span.attributes["http.status_code"] = nav.responseStatus;
  endSpan(span, "");
}

// -- every page ------------------------------------------------------------------------------
byTestId("cart-count").textContent = localStorage.getItem("shop.cartCount") || "0";

const currencySelect = byTestId("currency-select");
currencySelect.addEventListener("change", () => {
  const span = startSpan("change currency", "interaction", null);
  span.attributes["currency.from"] = currentCurrency();
  span.attributes["currency.to"] = currencySelect.value;
  endSpan(span, "");
  setCurrency(currencySelect.value);
});

if (document.readyState === "complete") {
  recordDocumentLoad();
} else {
  // loadEventEnd is set once the load handlers have returned
  window.addEventListener("load", () => setTimeout(recordDocumentLoad, 0));
}
