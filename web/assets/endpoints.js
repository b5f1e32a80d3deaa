// The endpoints page: the endpoints the user may use (its own and public
// ones) with their servers and limits; check their servers (up, stripes,
// a striped front end's data movers), add, edit, activate, deactivate
// and remove. activate is also the file manager's activation prompt.

import { get, post, put, del, ep } from './api.js';
import { h, field, dialog, confirm, toast, duration, listing } from './ui.js';
import * as tasks from './tasks.js';

// activate asks for the user's login on endpoint e and gives it to the
// service; it resolves to true once the endpoint is activated.
// A gsi endpoint takes a grid proxy (a file, or its PEM pasted) or, with
// a MyProxy server, the user's MyProxy username and pass phrase.
export async function activate(e) {
  const req = await get(ep(e) + '/activation_requirements');
  const proxy = req.DATA.find((r) => r.name === 'proxy');
  const fields = req.DATA.map((r) => r === proxy
    ? field(r.ui_name, h('div', { class: 'proxy' },
      h('input', { type: 'file', name: 'proxy_file', 'aria-label': 'Grid proxy file' }),
      h('textarea', { name: 'proxy', rows: 3, spellcheck: 'false', autocomplete: 'off', placeholder: 'or paste it: -----BEGIN CERTIFICATE-----…' })),
    `${r.description} (e.g. /tmp/x509up_u1000)`)
    : field(r.ui_name, h('input', {
      name: r.name, required: r.required, type: r.private ? 'password' : 'text',
      autocomplete: r.private ? 'current-password' : 'username',
    }), r.description));
  const res = await dialog({
    title: `Activate ${e.display_name}`, fields, submit: 'Activate',
    action: async (form) => {
      const body = Object.fromEntries(form);
      delete body.proxy_file;
      const file = form.get('proxy_file');
      if (file && file.size) body.proxy = await file.text();
      if (proxy && proxy.required && !body.proxy) throw new Error('Choose your grid proxy file, or paste the proxy.');
      return post(ep(e) + '/activate', body);
    },
  });
  if (!res) return false;
  toast(res.message + (res.resumed ? `; ${res.resumed} waiting task(s) resumed` : ''), { kind: 'ok' });
  if (res.resumed) tasks.poke();
  return true;
}

// activation says whether the user's activation of e holds, and how long.
function activation(e) {
  if (e.expires_in < 0) return 'not needed';
  return e.activated ? `active, ${duration(e.expires_in)} left` : 'not activated';
}

// serverState says whether a server is up, and striped, as ferry
// endpoint show does.
function serverState(st) {
  if (!st.up) return `down: ${st.error}`;
  if (st.movers.length) {
    return `up, striped front end: ${st.stripes} stripes, ${st.movers.filter((m) => m.up).length} of ${st.movers.length} movers up`;
  }
  return st.stripes > 1 ? `up, striped: ${st.stripes} stripes (SPAS)` : 'up';
}

// server is a server's list item: its URI and, once probed (a
// server_state), its state and its movers'.
function server(uri, st) {
  return h('li', {}, h('code', { text: uri }),
    st && h('span', { class: st.up ? 'up' : 'down', text: ` ${serverState(st)}` }),
    st?.movers.length > 0 && h('ul', { class: 'movers' }, st.movers.map((m) => h('li', {},
      `Mover ${m.index} `, h('code', { text: m.address }),
      h('span', { class: m.up ? 'up' : 'down', text: m.up ? ' up' : ` down: ${m.reason}` })))));
}

// form opens the add or edit dialog; it resolves to the stored endpoint.
function form(e) {
  const v = e || { DATA: [], default_directory: '/', auth_method: 'anonymous', public: false, max_concurrent: 0 };
  const auth = h('select', { name: 'auth_method' },
    ['anonymous', 'password', 'gsi'].map((m) => h('option', { value: m, text: m, selected: v.auth_method === m })));
  return dialog({
    title: e ? `Edit ${e.display_name}` : 'Add an endpoint', submit: e ? 'Save' : 'Add',
    fields: [
      field('Name', h('input', { name: 'name', required: true, value: v.name || '', pattern: '[A-Za-z0-9._@\\-]{1,64}', autocomplete: 'off' }), 'letters, digits and . _ - @'),
      field('Description', h('input', { name: 'description', value: v.description || '' })),
      field('Servers', h('textarea', { name: 'servers', required: true, rows: 2, value: v.DATA.map((sv) => sv.uri).join('\n') }),
        'one URL per line, e.g. ftp://host:2811; several are data movers of one endpoint'),
      field('Default directory', h('input', { name: 'default_directory', value: v.default_directory })),
      field('Authentication', auth, 'gsi: gsiftp:// servers, each user activates it with a grid proxy'),
      field('MyProxy server', h('input', { name: 'myproxy_server', value: v.myproxy_server || '', placeholder: 'host:7512', autocomplete: 'off' }),
        'gsi only: users may activate with their MyProxy username and pass phrase (used once, never stored) instead of a proxy'),
      field('MyProxy server DN', h('input', { name: 'myproxy_server_dn', value: v.myproxy_server_dn || '', placeholder: '/O=Grid/CN=host/myproxy.example.org', autocomplete: 'off' }),
        'if its certificate does not name its host'),
      field('Most tasks at once', h('input', { name: 'max_concurrent', type: 'number', min: 0, value: v.max_concurrent }), '0: no limit'),
      field('Reached through', h('input', { name: 'via', value: v.via_display_name || '', placeholder: 'owner#name', autocomplete: 'off' }),
        'a head node\'s endpoint (ferry gridftp --multicast) in front of a private network, through which alone this one is reached; empty: reached directly'),
      h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'public', checked: v.public }), 'Public: every user can see and use it'),
    ],
    action: (f) => {
      const spec = {
        name: f.get('name'), description: f.get('description'), default_directory: f.get('default_directory') || '/',
        auth_method: f.get('auth_method'), public: f.has('public'), max_concurrent: Number(f.get('max_concurrent') || 0),
        DATA: f.get('servers').split(/\s+/).filter(Boolean).map((uri) => ({ uri })),
        via: f.get('via').trim(),
        myproxy_server: f.get('myproxy_server').trim(), myproxy_server_dn: f.get('myproxy_server_dn').trim(),
      };
      return e ? put(ep(e), spec) : post('endpoint', spec);
    },
  });
}

export function endpoints(main, { user }) {
  const list = h('div', { class: 'endpoints', 'aria-busy': 'true' });
  const status = h('p', { class: 'error', role: 'alert' });
  const { refresh, run } = listing(list, status, async () => {
    const l = await get('endpoint_search', { limit: 1000 });
    return l.DATA.length ? l.DATA.map(card) : h('p', { class: 'muted', text: 'No endpoints yet: add one.' });
  });
  const card = (e) => {
    const mine = e.owner === user;
    const password = e.auth_method !== 'anonymous';
    const servers = h('ul', { class: 'servers', 'aria-live': 'polite' }, e.DATA.map((sv) => server(sv.uri)));
    // Probing logs in to every server (and each front end to its movers):
    // done when asked, not for every card the page lists.
    const check = async () => {
      servers.setAttribute('aria-busy', 'true');
      try {
        const l = await get(ep(e) + '/server_state');
        servers.replaceChildren(...l.DATA.map((st) => server(st.uri, st)));
      } finally {
        servers.removeAttribute('aria-busy');
      }
      return false;
    };
    return h('article', { class: 'card endpoint', 'aria-labelledby': `ep-${e.id}` },
      h('h2', { id: `ep-${e.id}`, text: e.display_name }),
      e.description && h('p', { text: e.description }),
      h('dl', {},
        h('dt', { text: 'Servers' }), h('dd', {}, servers),
        h('dt', { text: 'Default directory' }), h('dd', {}, h('code', { text: e.default_directory })),
        h('dt', { text: 'Authentication' }), h('dd', { text: e.auth_method + (e.myproxy_server ? `, MyProxy server ${e.myproxy_server}` : '') }),
        h('dt', { text: 'Activation' }), h('dd', { text: activation(e) }),
        h('dt', { text: 'Limit' }), h('dd', { text: e.max_concurrent ? `${e.max_concurrent} tasks at once` : 'no limit' }),
        h('dt', { text: 'Visibility' }), h('dd', { text: e.public ? 'public' : 'private' }),
        e.via && h('dt', { text: 'Reached through' }),
        e.via && h('dd', { text: `${e.via_display_name} (its head node forwards transfers here; the service cannot browse it)` })),
      h('div', { class: 'actions' },
        !e.via && e.activated && h('button', { type: 'button', text: 'Check servers', onclick: () => run(check) }),
        password && !e.activated && h('button', { type: 'button', text: 'Activate', onclick: () => run(() => activate(e)) }),
        password && e.activated && h('button', {
          type: 'button', text: 'Deactivate',
          onclick: () => run(async () => { toast((await post(ep(e) + '/deactivate')).message); return true; }),
        }),
        mine && h('button', { type: 'button', text: 'Edit', onclick: () => run(() => form(e)) }),
        mine && h('button', {
          type: 'button', class: 'danger', text: 'Remove',
          onclick: () => run(async () => await confirm(`Remove ${e.display_name}?`, 'Its tasks keep their history; new ones cannot use it.', 'Remove') && del(ep(e))),
        })));
  };
  main.append(
    h('div', { class: 'heading' }, h('h1', { text: 'Endpoints' }),
      h('button', { type: 'button', class: 'primary', text: 'Add endpoint', onclick: () => run(() => form()) })),
    status, list);
  refresh();
}
