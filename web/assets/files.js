// The file manager: two panes, each browsing a directory of one endpoint.
// A pane's selection can be renamed, deleted (a DELETE task) or
// transferred into the other pane's directory.

import { get, post, ep } from './api.js';
import { h, s, field, dialog, toast, bytes, date, errorText } from './ui.js';
import * as tasks from './tasks.js';
import { activate } from './endpoints.js';

const join = (dir, name) => (dir.endsWith('/') ? dir : dir + '/') + name;
const parent = (p) => p.replace(/\/[^/]+\/?$/, '') || '/';
const isDir = (f) => f.type === 'dir';
const when = (f) => f.last_modified ? Date.parse(f.last_modified) : 0;
const saved = 'ferry.panes';
const pageSize = 1000; // entries in a page of a listing, the most the service gives at once

export function files(main) {
  const panes = [pane('left', 'Left'), pane('right', 'Right')];
  [panes[0].other, panes[1].other] = [panes[1], panes[0]];
  main.append(h('h1', { class: 'sr-only', text: 'Files' }), h('div', { class: 'panes' }, panes.map((p) => p.section)));
  // A pane still being restored, or one with no directory listed yet (a
  // restore cut short by the page going away), keeps what was saved for
  // it: the other pane's save must not write it half restored (a reload
  // then would lose its directory).
  const state = JSON.parse(sessionStorage.getItem(saved) || '[]');
  const save = () => {
    const was = JSON.parse(sessionStorage.getItem(saved) || '[]');
    sessionStorage.setItem(saved, JSON.stringify(panes.map((p, i) =>
      p.restoring || (p.ep && p.path ? { id: p.ep.id, path: p.path } : was[i] ?? null))));
  };
  panes.forEach((p, i) => {
    p.save = save;
    if (state[i]) p.restore(state[i]);
  });
  // A pane shows what a task changed once the task ends.
  return tasks.subscribe((_, __, ended) => {
    for (const t of ended) {
      const id = t.type === 'DELETE' ? t.source_endpoint_id : t.destination_endpoint_id;
      for (const p of panes) if (p.ep && p.ep.id === id) p.list(p.path, { quiet: true });
    }
  });
}

function pane(id, title) {
  const p = { ep: null, path: '', entries: [], view: [], selected: new Set(), sort: { key: 'name', up: true }, focus: 0 };

  // Choosing the endpoint: a list of the user's endpoints to pick from.
  const choose = picker(id, title, open);
  const pick = h('form', { class: 'row', role: 'search', 'aria-label': `${title} pane endpoint`, onsubmit: (e) => { e.preventDefault(); choose.close(); open(choose.input.value.trim()); } },
    choose.box, h('button', { type: 'submit', text: 'Open' }));

  // Where the pane is: breadcrumbs, and a path to type.
  const crumbs = h('nav', { class: 'crumbs', 'aria-label': `${title} pane path` });
  const where = h('input', { name: 'path', autocomplete: 'off', spellcheck: 'false' });
  const go = h('form', { class: 'row', onsubmit: (e) => { e.preventDefault(); if (p.ep) p.list(where.value.trim() || '/'); } },
    field('Path', where), h('button', { type: 'submit', text: 'Go' }));

  const button = (text, onclick, label) => h('button', { type: 'button', text, onclick, 'aria-label': label, disabled: true });
  const b = {
    up: button('Up', () => p.list(parent(p.path)), 'Up to the parent directory'),
    refresh: button('Refresh', () => p.list(p.path)),
    mkdir: button('New folder', mkdir),
    rename: button('Rename', rename),
    remove: button('Delete', remove),
    transfer: id === 'left' ? button('Transfer →', transfer, 'Transfer the selection to the right pane')
      : button('← Transfer', transfer, 'Transfer the selection to the left pane'),
  };
  const hidden = h('input', { type: 'checkbox', name: 'show_hidden', onchange: () => p.ep && p.list(p.path) });
  const status = h('div', { class: 'status', role: 'alert' });
  const note = h('p', { class: 'muted note' });

  // The listing: a grid of rows with one tab stop; arrows move, Space
  // selects, Enter opens a directory, Backspace goes up.
  const all = h('input', { type: 'checkbox', 'aria-label': 'Select all', onchange: () => selectAll(all.checked) });
  const sorter = (key, label) => h('th', { scope: 'col', 'data-key': key },
    h('button', { type: 'button', class: 'sort', onclick: () => sortBy(key) }, label, h('span', { class: 'arrow', 'aria-hidden': 'true' })));
  const head = h('tr', {}, h('th', { class: 'pick' }, all), sorter('name', 'Name'), sorter('size', 'Size'), sorter('date', 'Modified'));
  const body = h('tbody');
  const table = h('table', { class: 'files', role: 'grid', 'aria-multiselectable': 'true', 'aria-label': `${title} pane files` }, h('thead', {}, head), body);
  body.addEventListener('keydown', (e) => {
    const tr = e.target.closest('tr[data-i]');
    if (!tr || e.target !== tr) return;
    const i = Number(tr.dataset.i);
    const last = p.view.length - 1;
    if (e.key === 'ArrowDown') focusRow(Math.min(last, i + 1));
    else if (e.key === 'ArrowUp') focusRow(Math.max(0, i - 1));
    else if (e.key === 'Home') focusRow(0);
    else if (e.key === 'End') focusRow(last);
    else if (e.key === ' ') toggle(i);
    else if (e.key === 'Enter') isDir(p.view[i]) ? enter(p.view[i]) : toggle(i);
    else if (e.key === 'Backspace' && p.path !== '/') p.list(parent(p.path), { focus: true });
    else if (e.key === 'a' && (e.ctrlKey || e.metaKey)) selectAll(true);
    else return;
    e.preventDefault();
  });
  body.addEventListener('click', (e) => {
    const tr = e.target.closest('tr[data-i]');
    if (!tr) return;
    const i = Number(tr.dataset.i);
    focusRow(i);
    if (e.target.closest('[data-open]')) enter(p.view[i]);
    else toggle(i);
  });

  const heading = h('h2', { id: `${id}-title`, text: `${title} pane` });
  p.section = h('section', { class: 'pane card', 'aria-labelledby': heading.id },
    heading, pick, crumbs, go,
    h('div', { class: 'toolbar', role: 'group', 'aria-label': `${title} pane actions` }, Object.values(b),
      h('label', { class: 'check' }, hidden, 'Show hidden files')),
    status, h('div', { class: 'scroll' }, table), note);

  // open finds an endpoint by owner#name (or UUID) and lists its
  // default directory.
  async function open(ref) {
    if (!ref) return;
    status.replaceChildren();
    try {
      p.ep = await get('endpoint/' + encodeURIComponent(ref));
    } catch (err) {
      return fail(`Cannot open ${ref}`, err);
    }
    choose.input.value = p.ep.display_name;
    heading.textContent = `${title} pane: ${p.ep.display_name}`;
    p.path = '';
    p.entries = [];
    await p.list(p.ep.default_directory, { prompt: true });
  }

  p.restore = async ({ id: epID, path }) => {
    p.restoring = { id: epID, path };
    try {
      p.ep = await get('endpoint/' + encodeURIComponent(epID));
      choose.input.value = p.ep.display_name;
      heading.textContent = `${title} pane: ${p.ep.display_name}`;
      await p.list(path);
    } catch { /* the endpoint is gone: start empty */ }
    p.restoring = null;
  };

  // list shows a directory. prompt: ask for an activation the endpoint
  // needs; quiet: leave the error line alone; focus: focus the first row.
  p.list = async (path, { prompt = false, quiet = false, focus = false } = {}) => {
    table.setAttribute('aria-busy', 'true');
    try {
      const l = await page(path, 0);
      p.path = l.path;
      p.entries = l.DATA;
      p.total = l.total;
      p.selected.clear();
      p.focus = 0;
      if (!quiet) status.replaceChildren();
      showing();
      p.save();
    } catch (err) {
      if (err.code === 'NotActivated') {
        // The pane stays there: a transfer into it waits for the activation.
        p.path ||= path;
        p.save();
        status.replaceChildren(h('span', { text: errorText(err) + ' ' }),
          h('button', { type: 'button', text: 'Activate…', onclick: () => activateAndList(path) }));
        if (prompt) activateAndList(path);
      } else if (!quiet) {
        fail('', err); // the message names the path and the endpoint
      }
    } finally {
      table.removeAttribute('aria-busy');
      render();
      if (focus) focusRow(0);
    }
  };

  // page asks for a page of the listing of path, from offset on: the
  // pane never asks for more.
  function page(path, offset) {
    return get('operation/' + ep(p.ep) + '/ls', { path, offset, limit: pageSize, show_hidden: hidden.checked });
  }

  // showing says how much of the directory the pane holds, with a button
  // for the next page while it holds less than all.
  function showing() {
    const n = p.entries.length;
    if (n >= p.total) {
      note.textContent = `${p.total} entries`;
      return;
    }
    note.replaceChildren(`Showing ${n} of ${p.total} entries. `,
      h('button', { type: 'button', class: 'link', text: `Show ${Math.min(pageSize, p.total - n)} more`, onclick: more }));
  }

  // more adds the next page of the listing.
  async function more() {
    table.setAttribute('aria-busy', 'true');
    try {
      const l = await page(p.path, p.entries.length);
      p.entries = p.entries.concat(l.DATA);
      p.total = l.DATA.length ? l.total : p.entries.length;
      showing();
    } catch (err) {
      fail('', err);
    } finally {
      table.removeAttribute('aria-busy');
      render();
    }
  }

  async function activateAndList(path) {
    try {
      if (await activate(p.ep)) await p.list(path);
    } catch (err) {
      fail(`Cannot activate ${p.ep.display_name}`, err);
    }
  }

  function fail(what, err) {
    status.replaceChildren(h('span', { text: what ? `${what}: ${errorText(err)}` : errorText(err) }));
  }

  function enter(f) {
    p.list(join(p.path, f.name), { focus: true });
  }

  function render() {
    const { key, up } = p.sort;
    const by = {
      name: (a, b) => a.name.localeCompare(b.name, undefined, { numeric: true }),
      size: (a, b) => a.size - b.size,
      date: (a, b) => when(a) - when(b),
    }[key];
    p.view = [...p.entries].sort((a, b) => (isDir(b) - isDir(a)) || (up ? 1 : -1) * by(a, b) || a.name.localeCompare(b.name));
    for (const th of head.querySelectorAll('th[data-key]')) {
      const on = th.dataset.key === key;
      th.setAttribute('aria-sort', on ? (up ? 'ascending' : 'descending') : 'none');
      th.querySelector('.arrow').textContent = on ? (up ? '▲' : '▼') : '';
    }
    body.replaceChildren(...p.view.map(row));
    if (p.ep && !p.view.length) body.append(h('tr', {}, h('td', { colspan: 4, class: 'muted empty', text: 'This directory is empty.' })));
    crumbs.replaceChildren(...path());
    where.value = p.path;
    update();
  }

  function row(f, i) {
    const on = p.selected.has(f.name);
    return h('tr', { 'data-i': i, tabindex: i === p.focus ? 0 : -1, 'aria-selected': String(on), class: isDir(f) ? 'dir' : '' },
      h('td', { class: 'pick' }, h('input', { type: 'checkbox', tabindex: -1, checked: on, 'aria-label': `Select ${f.name}` })),
      h('td', { class: 'name' }, icon(f.type),
        isDir(f) ? h('button', { type: 'button', class: 'link', tabindex: -1, 'data-open': '', text: f.name }) : h('span', { text: f.name })),
      h('td', { class: 'num', text: isDir(f) ? '—' : bytes(f.size) }),
      h('td', {}, date(f.last_modified)));
  }

  function path() {
    if (!p.ep) return [h('span', { class: 'muted', text: 'Choose an endpoint.' })];
    const parts = p.path.split('/').filter(Boolean);
    const crumb = (label, to, last) => last ? h('span', { 'aria-current': 'location', text: label })
      : h('button', { type: 'button', class: 'link', text: label, onclick: () => p.list(to) });
    return [crumb(p.ep.display_name, '/', !parts.length),
      ...parts.flatMap((part, i) => [h('span', { 'aria-hidden': 'true', text: '/' }),
        crumb(part, '/' + parts.slice(0, i + 1).join('/'), i === parts.length - 1)])];
  }

  function focusRow(i) {
    const rows = body.querySelectorAll('tr[data-i]');
    if (!rows[i]) return;
    rows[p.focus]?.setAttribute('tabindex', '-1');
    p.focus = i;
    rows[i].setAttribute('tabindex', '0');
    rows[i].focus();
  }

  function toggle(i) {
    const name = p.view[i].name;
    const on = !p.selected.has(name);
    if (on) p.selected.add(name);
    else p.selected.delete(name);
    const tr = body.querySelector(`tr[data-i="${i}"]`);
    tr.setAttribute('aria-selected', String(on));
    tr.querySelector('input').checked = on;
    update();
  }

  function selectAll(on) {
    p.selected = new Set(on ? p.entries.map((f) => f.name) : []);
    for (const tr of body.querySelectorAll('tr[data-i]')) {
      tr.setAttribute('aria-selected', String(on));
      tr.querySelector('input').checked = on;
    }
    update();
  }

  function sortBy(key) {
    p.sort = { key, up: p.sort.key === key ? !p.sort.up : true };
    render();
  }

  // update enables the actions the selection allows.
  function update() {
    const n = p.selected.size;
    all.checked = n > 0 && n === p.entries.length;
    all.indeterminate = n > 0 && n < p.entries.length;
    b.up.disabled = !p.ep || p.path === '/';
    b.refresh.disabled = b.mkdir.disabled = !p.ep || !p.path;
    b.rename.disabled = n !== 1;
    b.remove.disabled = n === 0;
    b.transfer.disabled = n === 0 || !p.other?.ep || !p.other.path;
  }

  const chosen = () => p.entries.filter((f) => p.selected.has(f.name));

  async function mkdir() {
    const done = await dialog({
      title: `New folder in ${p.path}`, submit: 'Create',
      fields: [field('Name', h('input', { name: 'name', required: true, pattern: '[^/]+', autocomplete: 'off' }))],
      action: (f) => post('operation/' + ep(p.ep) + '/mkdir', { path: join(p.path, f.get('name')) }),
    });
    if (done) p.list(p.path);
  }

  // rename refuses a name that is taken, unless Replace is ticked: the
  // dialog stays open with the refusal.
  async function rename() {
    const [f] = chosen();
    const done = await dialog({
      title: `Rename ${f.name}`, submit: 'Rename',
      fields: [field('New name', h('input', { name: 'name', required: true, pattern: '[^/]+', value: f.name, autocomplete: 'off' })),
        h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'overwrite' }), 'Replace a file of that name')],
      action: (form) => post('operation/' + ep(p.ep) + '/rename', {
        old_path: join(p.path, f.name), new_path: join(p.path, form.get('name')), overwrite: form.has('overwrite'),
      }),
    });
    if (done) p.list(p.path);
  }

  async function remove() {
    const list = chosen();
    const what = list.length === 1 ? list[0].name : `${list.length} items`;
    const res = await dialog({
      title: `Delete ${what}?`, submit: 'Delete', danger: true,
      fields: [h('p', { text: `From ${p.ep.display_name}:${p.path}, as a task; folders with all they hold.` }),
        h('ul', { class: 'names' }, list.slice(0, 8).map((f) => h('li', { text: f.name })), list.length > 8 && h('li', { text: '…' }))],
      action: () => post('delete', {
        endpoint: p.ep.id, recursive: list.some(isDir), label: `Delete ${what}`.slice(0, 128),
        DATA: list.map((f) => ({ path: join(p.path, f.name) })),
      }),
    });
    if (res) submitted(res, 'Delete');
  }

  async function transfer() {
    const to = p.other;
    const list = chosen();
    const check = (name, label, checked = false) => h('label', { class: 'check' }, h('input', { type: 'checkbox', name, checked }), label);
    const levels = [['', 'Always copy'], ...tasks.syncLevels.map((t, i) => [String(i), t])];
    // More destinations: each an endpoint and a directory there, which
    // get the same items in the same task.
    const known = h('datalist', { id: 'more-endpoints' });
    const more = h('ol', { class: 'more-destinations', 'aria-label': 'More destinations' });
    const addDestination = async () => {
      const n = more.children.length + 1;
      const name = h('input', { name: 'more_endpoint', list: known.id, placeholder: 'owner#name', autocomplete: 'off', spellcheck: 'false', required: true });
      const dir = h('input', { name: 'more_path', value: to.path, required: true });
      const li = h('li', {}, field(`Destination ${n + 1} endpoint`, name), field('Directory', dir),
        h('button', { type: 'button', text: 'Remove', 'aria-label': `Remove destination ${n + 1}`, onclick: () => li.remove() }));
      more.append(li);
      name.focus();
      if (!known.children.length) {
        try {
          const l = await get('endpoint_search', { limit: 100 });
          known.replaceChildren(...l.DATA.filter((e) => e.id !== p.ep.id).map((e) => h('option', { value: e.display_name })));
        } catch { /* suggestions are optional */ }
      }
    };
    const res = await dialog({
      title: `Transfer ${list.length === 1 ? list[0].name : list.length + ' items'}`, submit: 'Start transfer',
      fields: [
        h('p', {}, 'From ', h('code', { text: `${p.ep.display_name}:${p.path}` }), ' to ', h('code', { text: `${to.ep.display_name}:${to.path}` })),
        more, known, h('button', { type: 'button', class: 'add-destination', text: 'Add destination', onclick: addDestination }),
        field('Label', h('input', { name: 'label', maxlength: 128, autocomplete: 'off' })),
        field('Sync', h('select', { name: 'sync_level' }, levels.map(([v, t]) => h('option', { value: v, text: t })))),
        check('verify_checksum', 'Verify checksums', true),
        check('preserve_timestamp', 'Preserve modification times'),
        list.some(isDir) && check('delete_destination_extra', 'Delete destination files the source lacks'),
        list.some(isDir) && field('Small files', h('select', { name: 'tar' }, [['', 'As tar streams when it pays (auto)'],
          ['always', 'Always as tar streams'], ['never', 'One transfer per file']].map(([v, t]) => h('option', { value: v, text: t })))),
        check('compress', 'Compress in flight (both endpoints ferry servers)'),
        check('skip_source_errors', 'Skip missing or unreadable source files'),
        check('fail_on_quota_errors', 'Fail at once if the destination is full'),
        field('Deadline', h('input', { name: 'deadline', type: 'datetime-local' }), 'optional: until then failing files are retried'),
        h('fieldset', { class: 'notify' }, h('legend', { text: 'Notify me when it' }),
          check('notify_on_succeeded', 'succeeds', true), check('notify_on_failed', 'fails', true),
          check('notify_on_inactive', 'needs me (inactive)', true)),
      ],
      action: (f) => post('transfer', {
        source_endpoint: p.ep.id, label: f.get('label'),
        ...destinations(f, list),
        sync_level: f.get('sync_level') === '' ? undefined : Number(f.get('sync_level')),
        verify_checksum: f.has('verify_checksum'), preserve_timestamp: f.has('preserve_timestamp'),
        delete_destination_extra: f.has('delete_destination_extra'),
        tar: f.get('tar') || undefined, compress: f.has('compress') || undefined,
        skip_source_errors: f.has('skip_source_errors') || undefined, fail_on_quota_errors: f.has('fail_on_quota_errors') || undefined,
        notify_on_succeeded: f.has('notify_on_succeeded'), notify_on_failed: f.has('notify_on_failed'),
        notify_on_inactive: f.has('notify_on_inactive'),
        deadline: f.get('deadline') ? new Date(f.get('deadline')).toISOString() : undefined,
        DATA: list.map((e) => {
          const slash = isDir(e) ? '/' : '';
          return { source_path: join(p.path, e.name) + slash, destination_path: join(to.path, e.name) + slash, recursive: isDir(e) };
        }),
      }),
    });
    if (res) submitted(res, 'Transfer');
  }

  // destinations is the destination part of the transfer document: the
  // other pane's endpoint alone, or it and the destinations added.
  function destinations(f, list) {
    const eps = f.getAll('more_endpoint').map((e) => e.trim());
    if (!eps.length) return { destination_endpoint: p.other.ep.id };
    const dirs = f.getAll('more_path');
    const paths = (dir) => list.map((e) => join(dir, e.name) + (isDir(e) ? '/' : ''));
    return {
      destinations: [{ endpoint: p.other.ep.id },
        ...eps.map((endpoint, i) => ({ endpoint, destination_paths: paths(dirs[i] || '/') }))],
    };
  }

  function submitted(res, what) {
    toast(`${what} submitted`, { kind: 'ok', link: { href: '#/task/' + res.task_id, text: 'Watch it' } });
    tasks.poke(res.task_id);
    selectAll(false);
  }

  render();
  return p;
}

// icon draws a folder or a file.
function icon(type) {
  const d = type === 'dir' ? 'M1 3h5l1.5 1.5H15V13H1z' : 'M3 1h6l4 4v10H3zM9 1v4h4';
  return s('svg', { class: `icon ${type}`, viewBox: '0 0 16 16', width: 16, height: 16, 'aria-hidden': 'true' }, s('path', { d }));
}

// picker is a pane's endpoint box: a combobox whose list, shown when it
// is focused and filtered as one types, holds the endpoints the user may
// use (endpoint_search). Picking one calls open with its name; Enter on
// typed text submits the box's form.
function picker(id, title, open) {
  const list = h('ul', { id: `${id}-endpoints`, role: 'listbox', class: 'picker', 'aria-label': `Endpoints for the ${title.toLowerCase()} pane`, hidden: true });
  const input = h('input', { type: 'text', name: 'endpoint', role: 'combobox', 'aria-controls': list.id, 'aria-expanded': 'false',
    'aria-autocomplete': 'list', placeholder: 'owner#name', autocomplete: 'off', spellcheck: 'false' });
  let found = [];
  let active = -1;
  let typing = 0;
  let asked = 0;
  const show = (on) => {
    list.hidden = !on || !found.length;
    input.setAttribute('aria-expanded', String(!list.hidden));
  };
  const mark = (i) => {
    active = i;
    [...list.children].forEach((li, j) => li.setAttribute('aria-selected', String(j === i)));
    if (i < 0) return input.removeAttribute('aria-activedescendant');
    input.setAttribute('aria-activedescendant', list.children[i].id);
    list.children[i].scrollIntoView({ block: 'nearest' });
  };
  const choose = (e) => {
    input.value = e.display_name;
    show(false);
    open(e.display_name);
  };
  // suggest lists the endpoints whose name or description has text.
  const suggest = async (text) => {
    const n = ++asked;
    try {
      const l = await get('endpoint_search', { filter_fulltext: text, limit: 100 });
      if (n !== asked) return;
      found = l.DATA;
      list.replaceChildren(...found.map((e, i) => h('li', { id: `${list.id}-${i}`, role: 'option', 'aria-selected': 'false',
        onmousedown: (ev) => ev.preventDefault(), onclick: () => choose(e) },
      h('span', { text: e.display_name }), h('small', { class: 'muted', text: e.description || '' }))));
      if (!found.length) list.append(h('li', { class: 'muted', role: 'option', 'aria-disabled': 'true', text: text ? `No endpoint matches “${text}”.` : 'No endpoints yet: add one on the Endpoints page.' }));
      mark(-1);
      list.hidden = document.activeElement !== input;
      input.setAttribute('aria-expanded', String(!list.hidden));
    } catch { /* the list is a help: a name can be typed */ }
  };
  input.addEventListener('focus', () => {
    input.select();
    suggest('');
  });
  input.addEventListener('input', () => {
    clearTimeout(typing);
    typing = setTimeout(() => suggest(input.value.trim()), 150);
  });
  input.addEventListener('blur', () => show(false));
  input.addEventListener('keydown', (e) => {
    const n = found.length;
    if (e.key === 'ArrowDown' && n) {
      show(true);
      mark((active + 1) % n);
    } else if (e.key === 'ArrowUp' && n) {
      show(true);
      mark(active <= 0 ? n - 1 : active - 1);
    } else if (e.key === 'Enter' && !list.hidden && active >= 0) {
      choose(found[active]);
    } else if (e.key === 'Escape' && !list.hidden) {
      show(false);
    } else {
      return;
    }
    e.preventDefault();
  });
  const box = h('div', { class: 'combo' }, field('Endpoint', input), list);
  return { input, box, close: () => show(false) };
}
