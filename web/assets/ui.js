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

// bytes says n bytes in decimal units: 1.5 MB.
export function bytes(n) {
  if (!n) return '0 B';
  const units = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];
  const i = Math.min(units.length - 1, Math.floor(Math.log10(Math.abs(n)) / 3));
  const v = n / 1000 ** i;
  return `${i === 0 ? v : v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)} ${units[i]}`;
}

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

// date is a <time> element showing an ISO time as a date and time (or
// only the time of day when short).
export function date(iso, short = false) {
  if (!iso) return '—';
  const d = new Date(iso);
  return h('time', { datetime: iso, text: (short ? timeFormat : dateFormat).format(d) });
}

// errorText words a failed request for the user.
export const errorText = (err) => err.code ? `${err.message} (${err.code})` : err.message;

// toast shows a short message in the live region for a few seconds;
// link adds a link to follow.
export function toast(message, { kind = 'info', link } = {}) {
  const box = document.getElementById('toasts');
  const close = () => t.remove();
  const t = h('div', { class: `toast ${kind}` },
    h('span', { text: message }),
    link && h('a', { href: link.href, text: link.text, onclick: close }),
    h('button', { type: 'button', class: 'icon', 'aria-label': 'Dismiss', text: '×', onclick: close }));
  box.append(t);
  while (box.children.length > 3) box.firstChild.remove();
  setTimeout(close, 8000);
}

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
