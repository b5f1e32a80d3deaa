// The activity page (the user's tasks with live progress) and the task
// page (counters, throughput chart, failed files and events).

import { get, post } from './api.js';
import { h, field, confirm, toast, bytes, rate, date, errorText, humanize, count } from './ui.js';
import * as tasks from './tasks.js';
import { chart } from './chart.js';

// cancel asks, then cancels task t.
async function cancel(t) {
  const name = tasks.name(t);
  if (!await confirm(`Cancel ${name[0].toLowerCase() + name.slice(1)}?`, 'Files already transferred stay; the rest are not sent.', 'Cancel task')) return;
  try {
    toast((await post(`task/${t.task_id}/cancel`)).message);
    tasks.poke();
  } catch (err) {
    toast(errorText(err), { kind: 'bad' });
  }
}

// badge shows a task's status, and why when that says more than the
// status (a fatal error's code FAILED does not).
const badge = (t) => {
  let why = t.fatal_error?.code || (t.nice_status !== 'OK' && t.nice_status);
  if (why === t.status) why = '';
  return h('span', { class: `badge ${t.status.toLowerCase()}`, text: t.status }, why && h('small', { text: ` ${why}` }));
};

const route = (t) => t.type === 'DELETE' ? `delete on ${t.source_endpoint_display_name}`
  : `${t.source_endpoint_display_name || '?'} → ${t.destinations
    ? t.destinations.map((d) => d.endpoint_display_name || '?').join(', ')
    : t.destination_endpoint_display_name || '?'}`;

// bar is the progress element of a task.
function bar(t, p) {
  const label = `${tasks.name(t)} progress`;
  return p.fraction === null ? h('progress', { 'aria-label': label })
    : h('progress', { max: 1, value: p.fraction, 'aria-label': label });
}

// places caches, by task ID, where an unlabeled task's items are
// (SRC:path → DST:path), which only its own document says.
const places = new Map();

// title names a task in the activity list: its label, else where its
// items go, else (until that is known) its endpoints.
function title(t, then) {
  if (t.label) return t.label;
  if (!places.has(t.task_id)) {
    places.set(t.task_id, null);
    get('task/' + encodeURIComponent(t.task_id)).then((d) => {
      places.set(t.task_id, where(d));
      then();
    }, () => places.delete(t.task_id));
  }
  return places.get(t.task_id) || route(t);
}

// where says a task's items with their endpoints: SRC:path → DST:path.
function where(t) {
  const src = `${t.source_endpoint_display_name || '?'}:${t.source_path || ''}`;
  if (t.type === 'DELETE') return `delete ${src}`;
  const more = t.destinations?.length > 1 ? ` and ${t.destinations.length - 1} more` : '';
  return `${src} → ${t.destination_endpoint_display_name || '?'}:${t.destination_path || ''}${more}`;
}

// Filters of the activity list: each a select of the task_list filter
// key's values, and text in the label.
const statuses = [['', 'Any status'], ['ACTIVE', 'Active'], ['INACTIVE', 'Inactive'], ['SUCCEEDED', 'Succeeded'], ['FAILED', 'Failed']];
const types = [['', 'Any type'], ['TRANSFER', 'Transfer'], ['DELETE', 'Delete']];

export function activity(main) {
  const rows = new Map(); // task ID → its row's live parts
  const body = h('tbody');
  const note = h('p', { class: 'muted' });
  const status = h('p', { class: 'error', role: 'alert' });
  const select = (name, options) => h('select', { name, onchange: () => refilter() }, options.map(([v, t]) => h('option', { value: v, text: t })));
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter tasks', onsubmit: (e) => e.preventDefault() },
    field('Status', select('status', statuses)), field('Type', select('type', types)),
    field('Label', h('input', { type: 'search', name: 'label', autocomplete: 'off', oninput: () => { clearTimeout(typing); typing = setTimeout(refilter, 250); } })));
  let typing = 0;
  let last = { list: [], total: 0 };
  main.append(h('div', { class: 'heading' }, h('h1', { text: 'Activity' })), form, status,
    h('div', { class: 'scroll card' }, h('table', { class: 'tasks' },
      h('caption', { class: 'sr-only', text: 'Your tasks, newest first; progress updates by itself.' }),
      h('thead', {}, h('tr', {}, ['Task', 'Route', 'Status', 'Progress', 'Requested'].map((c) => h('th', { scope: 'col', text: c })),
        h('th', { scope: 'col' }, h('span', { class: 'sr-only', text: 'Actions' })))),
      body)),
    note);
  // Rows are kept and updated, so that the focus stays where it is.
  const row = (t) => {
    let r = rows.get(t.task_id);
    if (!r) {
      r = { link: h('a', { href: '#/task/' + t.task_id }), status: h('td'), progress: h('td', { class: 'progress' }), when: h('td'),
        cancel: h('button', { type: 'button', text: 'Cancel', onclick: () => cancel(r.t) }) };
      r.tr = h('tr', { 'data-task': t.task_id },
        h('td', {}, r.link), h('td', { text: route(t) }), r.status, r.progress, r.when, h('td', {}, r.cancel));
      rows.set(t.task_id, r);
    }
    r.t = t;
    const p = tasks.progress(t);
    r.link.textContent = title(t, () => show(last));
    r.status.replaceChildren(badge(t));
    r.progress.replaceChildren(bar(t, p), h('span', { text: p.text }));
    r.when.replaceChildren(date(t.request_time, false, true));
    r.cancel.hidden = tasks.done(t);
    return r.tr;
  };
  const show = ({ list, total }) => {
    last = { list, total };
    const focused = document.activeElement;
    body.replaceChildren(...list.map(row));
    if (!list.length && filter()) body.append(h('tr', {}, h('td', { colspan: 6, class: 'muted empty', text: 'No task matches these filters.' })));
    else if (!list.length) body.append(h('tr', {}, h('td', { colspan: 6, class: 'muted empty' }, 'No tasks yet: start a transfer in ', h('a', { href: '#/files', text: 'Files' }), '.')));
    if (body.contains(focused)) focused.focus();
    note.textContent = total > list.length ? `The latest ${list.length} of ${total} tasks.` : '';
  };
  // filter is the task_list filter the form asks for ("" for none).
  const filter = () => {
    const f = new FormData(form);
    return [['status', f.get('status')], ['type', f.get('type')], ['label', f.get('label').trim().replaceAll('/', ' ')]]
      .filter(([, v]) => v).map(([k, v]) => `${k}:${v}`).join('/');
  };
  // The unfiltered list is the one polled for every page; a filtered one
  // is asked for when the filters change and after each poll.
  let all = { list: [], total: 0 };
  let asked = 0;
  const refilter = async () => {
    const f = filter();
    if (!f) return show(all);
    const n = ++asked;
    try {
      const l = await get('task_list', { limit: 50, filter: f });
      if (n !== asked || f !== filter()) return;
      status.textContent = '';
      show({ list: l.DATA, total: l.total });
    } catch (err) {
      status.textContent = errorText(err);
    }
  };
  return tasks.subscribe((list, total) => {
    all = { list, total };
    refilter();
  });
}

export function task(main, _, id) {
  const title = h('h1', { text: `Task ${id.slice(0, 8)}` });
  const cancelButton = h('button', { type: 'button', class: 'danger', text: 'Cancel task', hidden: true, onclick: () => cancel(current) });
  const status = h('p', { class: 'error', role: 'alert' });
  const summary = h('div', { class: 'summary' });
  const counters = h('dl', { class: 'counters' });
  const plot = h('div', { class: 'plot' });
  const dests = h('section', { 'aria-labelledby': 'dests-title', hidden: true });
  const done = pages(id, 'successful_transfers', 'done-title', 'Transferred files');
  const failed = pages(id, 'failed_transfers', 'failed-title', 'Failed files');
  const evBody = h('tbody');
  const evNote = h('p', { class: 'muted' });
  main.append(
    h('p', {}, h('a', { href: '#/activity', text: '← Activity' })),
    h('div', { class: 'heading' }, title, cancelButton), status, summary,
    h('div', { class: 'grid2' },
      h('section', { class: 'card', 'aria-labelledby': 'counters-title' }, h('h2', { id: 'counters-title', text: 'Details' }), counters),
      h('section', { class: 'card', 'aria-labelledby': 'chart-title' }, h('h2', { id: 'chart-title', text: 'Throughput' }), plot)),
    dests, failed.section, done.section,
    h('section', { class: 'card', 'aria-labelledby': 'events-title' }, h('h2', { id: 'events-title', text: 'Events' }),
      h('div', { class: 'scroll' }, h('table', { class: 'events' },
        h('thead', {}, h('tr', {}, ['Time', 'Event', 'Description'].map((c) => h('th', { scope: 'col', text: c })))), evBody)), evNote));

  let current = null;
  let timer = 0;
  let left = false;
  const events = []; // the latest keptEvents of the task's history
  let seen = 0; // events of the history read or passed over: the offset of the next
  let total = 0;

  async function refresh() {
    try {
      const t = await get('task/' + encodeURIComponent(id));
      // The events since the last look, one page; when more are new
      // (a long history, opened), the last page of them instead.
      const path = `task/${encodeURIComponent(id)}/event_list`;
      let l = await get(path, { offset: seen, limit: keptEvents });
      if (l.total - seen > keptEvents) {
        seen = l.total - keptEvents;
        l = await get(path, { offset: seen, limit: keptEvents });
      }
      seen += l.DATA.length;
      total = Math.max(l.total, seen);
      events.push(...l.DATA);
      events.splice(0, events.length - keptEvents);
      if (left) return;
      const was = current;
      current = t;
      tasks.sample(t);
      render(t);
      if (!was || !tasks.done(was)) {
        if (t.type !== 'DELETE') done.load(t, t.files_transferred > 0);
        failed.load(t, t.subtasks_failed > 0 || t.destinations?.some((d) => d.files_failed));
      }
      status.textContent = '';
      if (!tasks.done(t)) timer = setTimeout(refresh, 1500);
    } catch (err) {
      if (left) return;
      status.textContent = errorText(err);
      if (err.status !== 404) timer = setTimeout(refresh, 3000);
    }
  }

  function render(t) {
    title.textContent = t.label || where(t);
    document.title = `${title.textContent} · ferry`;
    cancelButton.hidden = tasks.done(t);
    const p = tasks.progress(t);
    summary.replaceChildren(badge(t), bar(t, p), h('span', { text: p.text }));
    if (t.fatal_error) summary.append(h('p', { class: 'error', text: t.fatal_error.description }));
    const o = [t.sync_level === undefined ? 'always copy' : 'copy ' + tasks.syncLevels[t.sync_level].toLowerCase()];
    if (t.verify_checksum) o.push('verify checksums' + (t.checksum_algorithm ? ` (${t.checksum_algorithm})` : ''));
    if (t.preserve_timestamp) o.push('preserve times');
    if (t.delete_destination_extra) o.push('delete extra files');
    if (t.tar) o.push('tar ' + t.tar);
    if (t.compress) o.push('compress');
    if (t.ignore_missing) o.push('ignore missing');
    const item = (k, v) => [h('dt', { text: k }), h('dd', {}, v)];
    counters.replaceChildren(...[
      item('Type', t.type === 'DELETE' ? 'delete' : 'transfer'),
      item(t.type === 'DELETE' ? 'Path' : 'From', h('code', { text: `${t.source_endpoint_display_name}:${t.source_path}` })),
      t.type !== 'DELETE' && item('To', h('span', {}, h('code', { text: `${t.destination_endpoint_display_name}:${t.destination_path}` }),
        t.destinations?.length > 1 ? ` and ${t.destinations.length - 1} more (below)` : '')),
      t.type === 'DELETE'
        ? item('Paths', `${t.subtasks_total} done: ${t.files_transferred} deleted, ${t.files_skipped} missing, ${t.subtasks_failed} failed; ${count(t.files, 'file')} and ${count(t.directories, 'directory')} removed`)
        : item('Files', `${t.files} found, ${t.files_transferred} transferred, ${t.files_skipped} skipped, ${t.subtasks_failed} failed`),
      item('Directories', String(t.directories)),
      item('Bytes', `${bytes(t.bytes_transferred)} transferred` + (t.bytes_total ? ` of ${bytes(t.bytes_total)}` : '') + `, ${bytes(t.bytes_checksummed)} verified`),
      item('Average rate', rate(t.effective_bytes_per_second)), item('Faults', String(t.faults)),
      item('Requested', date(t.request_time)), item('Completed', date(t.completion_time)), item('Deadline', date(t.deadline)),
      item('Options', o.join(', ')), item('Task ID', h('code', { text: t.task_id })),
    ].filter(Boolean).flat());
    plot.replaceChildren(chart(throughput(t)));
    renderDests(t);
    const shown = events.slice(-200).reverse();
    const today = new Date().toDateString(); // events of today show only their time
    evBody.replaceChildren(...shown.map((e) => h('tr', { class: e.is_error ? 'error' : '' },
      h('td', {}, date(e.time, new Date(e.time).toDateString() === today)),
      h('td', {}, e.is_error ? h('span', { class: 'sr-only', text: 'Error: ' }) : null, e.code),
      h('td', { text: humanize(e.description) }))));
    evNote.textContent = total > shown.length ? `The latest ${shown.length} of ${total} events.` : '';
  }

  // renderDests shows each destination of a transfer to several: its
  // files there of the task's, and its failures.
  function renderDests(t) {
    dests.hidden = !t.destinations;
    if (!t.destinations) return;
    dests.className = 'card';
    dests.replaceChildren(h('h2', { id: 'dests-title', text: `Destinations (${t.destinations.length})` }),
      h('div', { class: 'scroll' }, h('table', { class: 'destinations' },
        h('thead', {}, h('tr', {}, ['Endpoint', 'Progress', 'Transferred', 'Skipped', 'Failed', 'Bytes'].map((c) => h('th', { scope: 'col', text: c })))),
        h('tbody', {}, t.destinations.map((d) => {
          const there = d.files_transferred + d.files_skipped;
          const label = `${d.endpoint_display_name} progress`;
          return h('tr', { 'data-endpoint': d.endpoint_id },
            h('td', { text: d.endpoint_display_name || d.endpoint_id }),
            h('td', { class: 'progress' }, t.files > 0 ? h('progress', { max: t.files, value: there, 'aria-label': label }) : h('progress', { 'aria-label': label }),
              h('span', { text: `${there}/${t.files} files` })),
            h('td', { text: String(d.files_transferred) }), h('td', { text: String(d.files_skipped) }),
            h('td', { class: d.files_failed ? 'error' : '', text: String(d.files_failed) }), h('td', { text: bytes(d.bytes_transferred) }));
        })))));
  }

  // throughput is the task's bytes over time: zero when it first
  // started, its PROGRESS events, and its end, of the events kept.
  function throughput(t) {
    const start = events.find((e) => e.code === 'STARTED');
    const points = start ? [{ time: Date.parse(start.time), bytes: 0 }] : [];
    for (const e of events) {
      if (e.code !== 'PROGRESS') continue;
      try {
        points.push({ time: Date.parse(e.time), bytes: JSON.parse(e.details).bytes_transferred });
      } catch { /* details without bytes: skip */ }
    }
    if (!points.length) return [];
    if (t.completion_time) points.push({ time: Date.parse(t.completion_time), bytes: t.bytes_transferred });
    return points;
  }

  refresh();
  return () => {
    left = true;
    clearTimeout(timer);
  };
}

// keptEvents is how many of a task's latest events its page reads and
// keeps: a page of the API's.
const keptEvents = 1000;

// pageSize is how many files a page of a task's files shows.
const pageSize = 50;

// pages is a section of a task's files, transferred or failed (the API's
// route kind, marker-paged), a page at a time: load shows (again) the
// current page, or hides the section when show is false.
function pages(id, kind, headingID, heading) {
  const section = h('section', { class: 'card', 'aria-labelledby': headingID, hidden: true });
  const h2 = h('h2', { id: headingID });
  const body = h('tbody');
  const head = h('tr');
  const where = h('span', { class: 'muted', 'aria-live': 'polite' });
  const prev = h('button', { type: 'button', text: `Previous ${pageSize}`, disabled: true, onclick: () => turn(-1) });
  const next = h('button', { type: 'button', text: `Next ${pageSize}`, disabled: true, onclick: () => turn(1) });
  let nextMarker = 0;
  section.append(h2, h('div', { class: 'scroll' }, h('table', { class: kind === 'failed_transfers' ? 'failed' : 'done' }, h('thead', {}, head), body)),
    h('div', { class: 'pager' }, prev, where, next));
  const markers = [0]; // of the pages seen; the last is the current one's
  let task = null;
  let asked = 0;
  async function fetchPage() {
    const n = ++asked;
    const l = await get(`task/${encodeURIComponent(id)}/${kind}`, { marker: markers.at(-1) || undefined, limit: pageSize });
    if (n !== asked) return;
    render(l);
  }
  function render(l) {
    const t = task;
    const failed = kind === 'failed_transfers';
    const count = failed ? t.subtasks_failed : t.files_transferred;
    h2.textContent = `${heading} (${count})`;
    const many = t.destinations && failed;
    const destName = (ep) => t.destinations?.find((d) => d.endpoint_id === ep)?.endpoint_display_name || ep;
    head.replaceChildren(...[...(many ? ['Destination'] : []), 'File', ...(failed ? ['Error'] : ['To', 'Size'])]
      .map((c) => h('th', { scope: 'col', text: c })));
    body.replaceChildren(...l.DATA.map((x) => h('tr', {},
      many && h('td', { text: destName(x.destination_endpoint_id) }),
      h('td', {}, h('code', { text: x.source_path })),
      failed ? h('td', { text: x.error }) : [h('td', {}, h('code', { text: x.destination_path })), h('td', { class: 'num', text: bytes(x.size) })])));
    const from = (markers.length - 1) * pageSize;
    where.textContent = l.DATA.length ? `${from + 1}–${from + l.DATA.length}` : '';
    prev.disabled = markers.length === 1;
    nextMarker = l.next_marker;
    next.disabled = !nextMarker;
  }
  function turn(step) {
    if (step > 0) markers.push(nextMarker);
    else markers.pop();
    fetchPage().catch((err) => toast(errorText(err), { kind: 'bad' }));
  }
  return {
    section,
    load(t, show) {
      task = t;
      section.hidden = !show;
      if (show) fetchPage().catch(() => { /* the next refresh tries again */ });
    },
  };
}