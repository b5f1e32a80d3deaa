// The user's recent tasks, polled while the page is visible (every
// 1.5 s while one runs): the activity page shows them, the file manager
// refreshes a pane when a task on its endpoint ends, and a toast says
// when a task ends or waits.

import { get } from './api.js';
import { toast, bytes, rate, duration, count } from './ui.js';

// syncLevels words the transfer API's sync levels 0 to 3, for the transfer
// form (files.js) and a task's settings (activity.js); what each compares
// is written once, in ferry's internal/synclevel.
export const syncLevels = ['If missing at the destination', 'If the size differs', 'If newer at the source',
  'If the checksum differs'];

export const done = (t) => t.status === 'SUCCEEDED' || t.status === 'FAILED';

const listeners = new Set();
let tasks = [];
let total = 0;
let timer = 0;
let running = false;
const seen = new Map(); // task ID → status at the last poll
const samples = new Map(); // task ID → the {time, bytes} of the changes within rateWindow, and the one before

// subscribe calls f(tasks, total, ended) now and after every poll; ended
// lists the tasks that ended since the last one. It returns the
// unsubscribe function.
export function subscribe(f) {
  listeners.add(f);
  f(tasks, total, []);
  return () => listeners.delete(f);
}

// start begins polling; stop ends it and forgets everything.
export function start() {
  running = true;
  poke();
}

export function stop() {
  running = false;
  clearTimeout(timer);
  tasks = [];
  seen.clear();
  samples.clear();
}

// poke polls now, e.g. after the submission of task id, which then gets
// its toast even if it ends before the poll.
export function poke(id) {
  if (id) seen.set(id, 'ACTIVE');
  clearTimeout(timer);
  if (running) timer = setTimeout(poll, 0);
}

document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible') poke();
});

async function poll() {
  let busy = false;
  try {
    const list = await get('task_list', { limit: 50 });
    if (!running) return;
    tasks = list.DATA;
    total = list.total;
    const ended = [];
    for (const t of tasks) {
      const before = seen.get(t.task_id);
      if (before && !done({ status: before }) && done(t)) ended.push(t);
      if (before && before !== 'INACTIVE' && t.status === 'INACTIVE') {
        toast(`${name(t)} is waiting: ${t.nice_status || 'inactive'}`, { kind: 'warn', link: { href: '#/task/' + t.task_id, text: 'Details' } });
      }
      seen.set(t.task_id, t.status);
      sample(t);
      busy ||= !done(t);
    }
    for (const t of ended) {
      const ok = t.status === 'SUCCEEDED';
      toast(`${name(t)} ${ok ? 'succeeded' : 'failed'}`, { kind: ok ? 'ok' : 'bad', link: { href: '#/task/' + t.task_id, text: 'Details' } });
    }
    for (const f of listeners) f(tasks, total, ended);
  } catch {
    // A failed poll is retried; a lost session signs out through the API.
  }
  if (running && document.visibilityState === 'visible') timer = setTimeout(poll, busy ? 1500 : 5000);
}

// name is how a toast calls a task: by its label, else its endpoints.
export const name = (t) => t.label ? `Task “${t.label}”`
  : t.type === 'DELETE' ? `Delete on ${t.source_endpoint_display_name}`
    : `Transfer from ${t.source_endpoint_display_name} to ${t.destination_endpoint_display_name}`;

// rateWindow is the time, in ms, a task's current rate averages over.
const rateWindow = 10000;

// sample keeps the task's bytes at this poll when they changed (or went
// back: the task started again), to measure its current rate.
export function sample(t) {
  let s = samples.get(t.task_id) || [];
  const now = { time: Date.now(), bytes: t.bytes_transferred };
  const last = s[s.length - 1];
  if (last && now.bytes < last.bytes) s = [];
  if (!last || now.bytes !== last.bytes) s.push(now);
  while (s.length > 2 && now.time - s[1].time > rateWindow) s.shift();
  samples.set(t.task_id, s);
}

// progress sums up a task's advance: fraction done (null when unknown),
// the current rate, and a line of text with files, bytes, rate and ETA.
// The rate is a moving average: the bytes that moved since the last
// change before the window, over the time since; the worker stores a
// task's bytes in batches, and one batch, small or large, says little.
export function progress(t) {
  // A delete task's items are its paths (subtasks, counted as they end);
  // its files and directories are what it removed.
  const del = t.type === 'DELETE';
  const items = del ? t.subtasks_total : t.files;
  let fraction = null;
  if (t.bytes_total > 0) fraction = Math.min(1, t.bytes_transferred / t.bytes_total);
  else if (!del && t.files > 0) fraction = (t.subtasks_succeeded + t.subtasks_failed) / t.files;
  // A failed task's bar shows the share of its items that arrived, not of those that ended.
  if (done(t)) fraction = t.status === 'SUCCEEDED' ? 1 : items > 0 ? t.subtasks_succeeded / items : 0;
  let r = t.effective_bytes_per_second;
  const s = samples.get(t.task_id) || [];
  const span = Date.now() - s[0]?.time;
  if (!done(t) && s.length >= 2 && span > 0) r = (s[s.length - 1].bytes - s[0].bytes) * 1000 / span;
  const parts = del ? [`${t.subtasks_succeeded}/${count(items, 'path')} deleted`,
    `${count(t.files, 'file')} and ${count(t.directories, 'directory')} removed`]
    : [`${t.subtasks_succeeded}/${t.files} files`,
      t.bytes_total > 0 ? `${bytes(t.bytes_transferred)} of ${bytes(t.bytes_total)}` : bytes(t.bytes_transferred)];
  if (r > 0) parts.push(rate(r));
  if (!done(t) && r > 0 && t.bytes_total > t.bytes_transferred) parts.push(`ETA ${duration((t.bytes_total - t.bytes_transferred) / r)}`);
  if (t.subtasks_failed) parts.push(`${t.subtasks_failed} failed`);
  return { fraction, rate: r, text: parts.join(' · ') };
}
