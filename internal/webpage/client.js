// The client of the public API (/api/v1) that the storefront and the admin
// console share: their tokens, the one request function with its token
// refresh, error answers (problem+json) as Problems, and the message line.
// Each page loads it before its own app.js; classic scripts share one
// global scope, so the page sees what this file declares.
"use strict";

const API = "/api/v1";
const $ = (id) => document.getElementById(id);

// Problem is an error answer as an Error whose message is a sentence for
// people (shopClient's describe); errors are its field errors.
class Problem extends Error {
  constructor(status, doc, message) {
    super(message);
    this.status = status;
    this.code = (doc && doc.code) || "";
    this.errors = (doc && Array.isArray(doc.errors)) ? doc.errors : [];
  }
}

async function readBody(r) {
  const type = r.headers.get("Content-Type") || "";
  if (r.status === 204 || !type.includes("json")) return null;
  try { return await r.json(); } catch { return null; }
}

// ---- messages -----------------------------------------------------------
let messageTimer = null;
function say(text, isError = false) {
  const m = $("message");
  m.textContent = text;
  m.classList.toggle("error", isError);
  m.setAttribute("role", isError ? "alert" : "status");
  m.hidden = false;
  clearTimeout(messageTimer);
  if (!isError) messageTimer = setTimeout(() => { m.hidden = true; }, 6000);
}
const unreachable = "The shop could not be reached. Check your connection and try again.";
const fail = (err) => say(err instanceof Problem ? err.message : unreachable, true);

// shopClient is a page's client of the API. Its tokens are kept in
// storage under prefix; words are the page's sentences for problem codes;
// fieldsInMessage adds a problem's field errors to its message (for a page
// that does not show them beside the fields); signedOut runs after a
// session was cleared because its tokens were refused.
function shopClient({ storage, prefix, words, fieldsInMessage = false, signedOut = () => {} }) {
  const key = (k) => prefix + k;
  const session = {
    get access() { return storage.getItem(key("access")) || ""; },
    get refresh() { return storage.getItem(key("refresh")) || ""; },
    get email() { return storage.getItem(key("email")) || ""; },
    get name() { return storage.getItem(key("name")) || ""; },
    setName(name) { if (name) storage.setItem(key("name"), name); else storage.removeItem(key("name")); },
    save(pair, email) {
      storage.setItem(key("access"), pair.access_token);
      storage.setItem(key("refresh"), pair.refresh_token);
      if (email) storage.setItem(key("email"), email);
    },
    clear() { ["access", "refresh", "email", "name"].forEach((k) => storage.removeItem(key(k))); },
  };

  // A refresh token is single use and two refreshes with the same one
  // revoke the session, so refreshes are serialized, across tabs too (Web
  // Locks), and a caller that waited uses the pair another one got.
  let refreshing = null;
  function refreshTokens(stale) {
    if (!refreshing) {
      const run = async () => {
        if (session.access !== stale) return true; // refreshed meanwhile
        if (!session.refresh) return false;
        const r = await fetch(API + "/auth/refresh", {
          method: "POST", headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ refresh_token: session.refresh }),
        });
        if (!r.ok) { session.clear(); return false; }
        session.save(await r.json());
        return true;
      };
      refreshing = (navigator.locks ? navigator.locks.request(key("refresh"), run) : run())
        .finally(() => { refreshing = null; });
    }
    return refreshing;
  }

  // describe turns a problem document into a sentence for people.
  function describe(status, doc) {
    if (!doc) return "Something went wrong (HTTP " + status + ").";
    let text = words[doc.code] || doc.detail || doc.title || "Something went wrong (HTTP " + status + ").";
    if (fieldsInMessage && Array.isArray(doc.errors) && doc.errors.length) {
      text += " " + doc.errors.map((e) => e.field + ": " + e.message).join("; ") + ".";
    }
    return text;
  }

  // api sends one request and answers its JSON body, or throws a Problem.
  // A body is sent as JSON, or as itself with its type when it is a Blob
  // (a file). With opts.auth it carries the access token, refreshed once
  // when it has expired; opts.idempotencyKey and opts.headers are sent as
  // given.
  async function api(method, path, body, opts = {}) {
    const raw = body instanceof Blob;
    const send = () => {
      const headers = {};
      if (body !== undefined) headers["Content-Type"] = raw ? body.type || "application/octet-stream" : "application/json";
      if (opts.auth && session.access) headers["Authorization"] = "Bearer " + session.access;
      if (opts.idempotencyKey) headers["Idempotency-Key"] = opts.idempotencyKey;
      Object.assign(headers, opts.headers || {});
      return fetch(API + path, { method, headers, body: body === undefined || raw ? body : JSON.stringify(body) });
    };
    const stale = session.access;
    let r = await send();
    if (r.status === 401 && opts.auth && session.refresh && await refreshTokens(stale)) r = await send();
    if (r.status === 401 && opts.auth) { session.clear(); signedOut(); }
    const doc = await readBody(r);
    if (!r.ok) throw new Problem(r.status, doc, describe(r.status, doc));
    return doc;
  }

  return { session, api };
}
