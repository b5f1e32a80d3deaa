// The REST API under /api/v0.10/: JSON over fetch with the session cookie,
// and the session's CSRF token on every unsafe request.

const prefix = '/api/v0.10/';
let csrf = '';
let signedOut = () => {};

// ApiError is a failed request: the HTTP status and the API's error
// document (code, message, request_id).
export class ApiError extends Error {
  constructor(status, doc) {
    super(doc.message || `The service answered HTTP ${status}.`);
    this.status = status;
    this.code = doc.code || '';
    this.requestId = doc.request_id || '';
  }
}

// setSession remembers the CSRF token of the signed-in session.
export function setSession(token) { csrf = token; }

// onSignedOut sets what happens when the API says the session is gone.
export function onSignedOut(f) { signedOut = f; }

// call sends a request to path (relative to the API prefix) and returns
// the answer's document.
async function call(method, path, { query, body } = {}) {
  let url = prefix + path;
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') q.set(k, v);
    if (q.size) url += '?' + q;
  }
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET') headers['X-CSRF-Token'] = csrf;
  let resp;
  try {
    resp = await fetch(url, { method, headers, credentials: 'same-origin', body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new ApiError(0, { code: 'Unavailable', message: `The service does not answer (${e.message}).` });
  }
  const doc = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    if (resp.status === 401 && path !== 'auth/login') signedOut();
    throw new ApiError(resp.status, doc.code ? doc : { message: `The service answered HTTP ${resp.status} ${resp.statusText}.` });
  }
  return doc;
}

export const get = (path, query) => call('GET', path, { query });
export const post = (path, body) => call('POST', path, { body });
export const put = (path, body) => call('PUT', path, { body });
export const del = (path) => call('DELETE', path);

// ep is the path segment of an endpoint: its UUID.
export const ep = (e) => 'endpoint/' + encodeURIComponent(e.id);
