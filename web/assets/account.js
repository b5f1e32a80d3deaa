// The account page: the public keys with which the user logs in to the
// service's SSH command gateway (ssh USER@HOST COMMAND): list, add,
// remove.

import { get, post, del } from './api.js';
import { h, field, dialog, confirm, date, listing } from './ui.js';

// addKey asks for a public key (a .pub file, or its line pasted).
function addKey() {
  return dialog({
    title: 'Add an SSH key', submit: 'Add',
    fields: [
      field('Public key file', h('input', { type: 'file', name: 'key_file', accept: '.pub' })),
      field('or its line', h('textarea', {
        name: 'key', rows: 3, spellcheck: 'false', autocomplete: 'off', placeholder: 'ssh-ed25519 AAAA… you@laptop',
      }), 'the contents of ~/.ssh/id_ed25519.pub, say: never the private key'),
    ],
    action: async (form) => {
      const file = form.get('key_file');
      const key = file && file.size ? await file.text() : form.get('key');
      if (!key.trim()) throw new Error('Choose your public key file, or paste its line.');
      return post('ssh_keys', { DATA_TYPE: 'ssh_key', key });
    },
  });
}

export function account(main, { user }) {
  const list = h('div', { class: 'keys', 'aria-busy': 'true' });
  const status = h('p', { class: 'error', role: 'alert' });
  const { refresh, run } = listing(list, status, async () => {
    const l = await get('ssh_keys');
    return l.DATA.length
      ? h('table', {},
        h('thead', {}, h('tr', {}, ['Fingerprint', 'Key', 'Added', ''].map((t) => h('th', { text: t })))),
        h('tbody', {}, l.DATA.map(row)))
      : h('p', { class: 'muted', text: 'No SSH keys yet: add one to use ferry over SSH.' });
  });
  const row = (k) => h('tr', {},
    h('td', {}, h('code', { text: k.fingerprint })),
    h('td', { class: 'key', text: k.key.split(' ').slice(2).join(' ') || k.key.split(' ')[0] }),
    h('td', {}, date(k.created)),
    h('td', {}, h('button', {
      type: 'button', class: 'danger', text: 'Remove', 'aria-label': `Remove key ${k.fingerprint}`,
      onclick: () => run(async () => await confirm('Remove this SSH key?', `${k.fingerprint} will no longer log in.`, 'Remove') && del(`ssh_keys/${k.id}`)),
    })));
  main.append(
    h('div', { class: 'heading' }, h('h1', { text: 'Account' }),
      h('button', { type: 'button', class: 'primary', text: 'Add SSH key', onclick: () => run(addKey) })),
    h('p', {}, `Signed in as ${user}. With an SSH key here, run ferry's commands with nothing installed: `,
      h('code', { text: `ssh ${user}@${location.hostname} ls ENDPOINT:/path` }),
      ', or ', h('code', { text: `ssh ${user}@${location.hostname}` }), ' for a prompt (when the service serves SSH).'),
    h('h2', { text: 'SSH keys' }), status, list);
  refresh();
}
