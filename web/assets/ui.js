// DOM helpers, formatting, toasts and dialogs shared by the pages.

// h makes an element: props sets attributes, except on* (listeners),
// class, text, and the boolean/value properties; children are nodes,
// strings, or arrays of them; null and false are left out.
export function h(tag, props = {}, ...children) {
  return build(document.createElement(tag), props, children);
}

// s is h for SVG elements.
export function s(tag, props = {}, ...children) {
  return build(document.createElementNS('http://www.w3.org/2000/svg', tag), props, children);
}

const properties = new Set(['value', 'checked', 'disabled', 'hidden', 'selected', 'required', 'open']);

function build(el, props, children) {
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false && !properties.has(k)) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = v;
    else if (properties.has(k)) el[k] = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  el.append(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

// field is a labelled form control.
export function field(label, control, hint) {
  return h('label', { class: 'field' }, h('span', { text: label }), control, hint && h('small', { class: 'muted', text: hint }));
}

// bytes says n bytes in binary units, as the CLI does: 1.5 MiB.
export function bytes(n) {
  if (!n) return '0 B';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  const i = Math.max(0, Math.min(units.length - 1, Math.floor(Math.log2(Math.abs(n)) / 10)));
  return i === 0 ? `${n} B` : `${(n / 1024 ** i).toFixed(1)} ${units[i]}`;
}

// count says n of a noun in English, as ferry's internal/plural does:
// "1 file", "2 files", "2 directories".
export const count = (n, noun) => `${n} ${n === 1 ? noun : /[^aeiou]y$/.test(noun) ? noun.slice(0, -1) + 'ies' : noun + 's'}`;

export const rate = (n) => bytes(Math.round(n)) + '/s';

// duration says a number of seconds: 1 h 5 min, 3 min 2 s, 40 s.
export function duration(sec) {
  if (sec < 10) return `${sec.toFixed(1)} s`;
  sec = Math.round(sec);
  if (sec < 60) return `${sec} s`;
  if (sec < 3600) return `${Math.floor(sec / 60)} min ${sec % 60} s`;
  return `${Math.floor(sec / 3600)} h ${Math.floor(sec % 3600 / 60)} min`;
}

const dateFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
const timeFormat = new Intl.DateTimeFormat(undefined, { timeStyle: 'medium' });
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });

// ago says how long before now a time was (5 minutes ago, yesterday);
// a week or more ago, the date.
export function ago(d) {
  const sec = (d - Date.now()) / 1000;
  for (const [unit, size, below] of [['second', 1, 60], ['minute', 60, 3600], ['hour', 3600, 86400], ['day', 86400, 7 * 86400]]) {
    if (Math.abs(sec) < below) return relative.format(Math.round(sec / size), unit);
  }
  return dateFormat.format(d);
}

// date is a <time> element showing an ISO time in local time: a date
// and time (or only the time of day when short; or how long ago when
// relative), with the full local time as its tooltip.
export function date(iso, short = false, rel = false) {
  if (!iso) return '—';
  const d = new Date(iso);
  const text = rel ? ago(d) : (short ? timeFormat : dateFormat).format(d);
  return h('time', { datetime: iso, title: d.toLocaleString(), text });
}

// humanize rewrites the byte counts and rates in a service's text in
// human units: "2097152 bytes transferred, 1048576 bytes/s" reads
// "2.0 MiB transferred, 1.0 MiB/s".
export const humanize = (text) => text.replace(/\b(\d+) bytes?(\/s)?/g, (_, n, s) => bytes(Number(n)) + (s || ''));

// errorText words a failed request for the user: the API's message, and
// for a fault of the service (HTTP 5xx) its request ID, to report.
export function errorText(err) {
  const msg = err.message || 'The request failed.';
  return err.status >= 500 && err.requestId ? `${msg} (request ID ${err.requestId})` : msg;
}

// toast shows a short message in a toast that goes by itself (errors
// stay longer, and none goes while the pointer or the focus is on it);
// link adds a link to follow. Errors are alerts, the rest statuses.
export function toast(message, { kind = 'info', link } = {}) {
  const box = document.getElementById('toasts');
  const close = () => t.remove();
  const t = h('div', { class: `toast ${kind}`, role: kind === 'bad' ? 'alert' : 'status' },
    h('span', { text: message }),
    link && h('a', { href: link.href, text: link.text, onclick: close }),
    h('button', { type: 'button', class: 'icon', 'aria-label': 'Dismiss', text: '×', onclick: close }));
  box.append(t);
  while (box.children.length > 3) box.firstChild.remove();
  let timer = 0;
  const wait = () => { timer = setTimeout(close, toastTime[kind] ?? toastTime.info); };
  const hold = () => clearTimeout(timer);
  const resume = () => { if (!t.matches(':hover, :focus-within')) { hold(); wait(); } };
  t.addEventListener('mouseenter', hold);
  t.addEventListener('focusin', hold);
  t.addEventListener('mouseleave', resume);
  t.addEventListener('focusout', () => setTimeout(resume));
  wait();
}

// toastTime is how long a toast of each kind stays, in milliseconds.
export const toastTime = { info: 6000, ok: 6000, warn: 10000, bad: 12000 };

// dialog opens a modal form. fields are its controls; action is called
// with the form's FormData when it is submitted: the dialog closes with
// its result, or shows its error and stays open. The promise resolves to
// the result, or to null when the user cancels.
export function dialog({ title, fields = [], submit = 'OK', danger = false, action }) {
  return new Promise((resolve) => {
    const error = h('p', { class: 'error', role: 'alert' });
    const ok = h('button', { type: 'submit', class: danger ? 'danger' : 'primary', text: submit });
    const form = h('form', { method: 'dialog' },
      h('h2', { text: title }), fields, error,
      h('div', { class: 'actions' },
        h('button', { type: 'button', text: 'Cancel', onclick: () => d.close() }), ok));
    const d = h('dialog', { 'aria-label': title }, form);
    let result = null;
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      ok.disabled = true;
      error.textContent = '';
      try {
        result = await action(new FormData(form));
        d.close();
      } catch (err) {
        error.textContent = errorText(err);
      } finally {
        ok.disabled = false;
      }
    });
    d.addEventListener('close', () => { d.remove(); resolve(result); });
    document.body.append(d);
    d.showModal();
  });
}

// listing keeps list filled with the nodes that fill makes (from a
// fresh answer of the API), or says in status why it could not: refresh
// fills it again; run does an action and refreshes when it returns true,
// or toasts its failure.
export function listing(list, status, fill) {
  const refresh = async () => {
    try {
      list.replaceChildren(...[await fill()].flat());
      status.textContent = '';
    } catch (err) {
      status.textContent = errorText(err);
    }
    list.removeAttribute('aria-busy');
  };
  const run = async (what) => {
    try {
      if (await what()) await refresh();
    } catch (err) {
      toast(errorText(err), { kind: 'bad' });
    }
  };
  return { refresh, run };
}

// confirm asks a yes/no question in a dialog.
export async function confirm(title, message, submit, danger = true) {
  return !!await dialog({ title, fields: [h('p', { text: message })], submit, danger, action: () => true });
}

// focusHeading moves the focus to the page's heading, so that a screen
// reader announces the new page.
export function focusHeading(main) {
  const h1 = main.querySelector('h1');
  if (h1) {
    h1.tabIndex = -1;
    h1.focus({ preventScroll: true });
  }
}
