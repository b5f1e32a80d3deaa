// The app: session, sign-in page, navigation and the hash routes
// #/files, #/activity, #/task/ID, #/endpoints and #/account.

import { get, post, setSession, onSignedOut, ApiError } from './api.js';
import { h, field, errorText, focusHeading } from './ui.js';
import * as tasks from './tasks.js';
import { files } from './files.js';
import { activity, task } from './activity.js';
import { endpoints } from './endpoints.js';
import { account } from './account.js';

const main = document.getElementById('main');
const session = { user: '' };
let leave = () => {}; // stops the current page's timers

const routes = [
  [/^#\/activity$/, activity, 'Activity'],
  [/^#\/task\/([\w-]+)$/, task, 'Task'],
  [/^#\/endpoints$/, endpoints, 'Endpoints'],
  [/^#\/account$/, account, 'Account'],
  [/^#\/files$/, files, 'Files'],
];

// show renders the page of the current hash, or the sign-in page.
function show() {
  leave();
  leave = () => {};
  main.replaceChildren();
  if (!session.user) return signIn();
  let found = routes.find(([re]) => re.test(location.hash));
  if (!found) {
    history.replaceState(null, '', '#/files');
    found = routes.at(-1);
  }
  const [re, page, title] = found;
  document.title = `${title} · ferry`;
  const section = location.hash.startsWith('#/task/') ? '#/activity' : location.hash;
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.hash === section) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  leave = page(main, { user: session.user }, ...location.hash.match(re).slice(1)) || leave;
  focusHeading(main);
}

function signedIn(user, csrf) {
  session.user = user;
  setSession(csrf);
  document.getElementById('user').textContent = user;
  document.getElementById('nav').hidden = false;
  document.getElementById('who').hidden = false;
  tasks.start();
  show();
}

function signedOut() {
  if (!session.user) return;
  session.user = '';
  setSession('');
  tasks.stop();
  document.getElementById('nav').hidden = true;
  document.getElementById('who').hidden = true;
  document.querySelectorAll('dialog').forEach((d) => d.close());
  show();
}

function signIn() {
  document.title = 'Sign in · ferry';
  const error = h('p', { class: 'error', role: 'alert' });
  const username = h('input', { name: 'username', autocomplete: 'username', required: true, autofocus: true });
  const password = h('input', { name: 'password', type: 'password', autocomplete: 'current-password', required: true });
  const button = h('button', { type: 'submit', class: 'primary', text: 'Sign in' });
  const form = h('form', { class: 'signin card', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title', text: 'Sign in to ferry' }),
    h('p', { class: 'muted', text: 'Move research data between endpoints: fast, verified, fire-and-forget.' }),
    field('User name', username), field('Password', password), error, button);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    button.disabled = true;
    error.textContent = '';
    try {
      const t = await post('auth/login', { username: username.value, password: password.value, kind: 'session', name: 'web' });
      signedIn(username.value, t.csrf_token);
    } catch (err) {
      error.textContent = err.status === 401 ? 'Wrong user name or password.' : errorText(err);
      password.select();
    } finally {
      button.disabled = false;
    }
  });
  main.replaceChildren(form);
  username.focus();
}

document.getElementById('signout').addEventListener('click', async () => {
  try {
    await post('auth/logout');
  } finally {
    signedOut();
  }
});
document.getElementById('skip').addEventListener('click', (e) => {
  e.preventDefault();
  main.focus();
});
onSignedOut(signedOut);
addEventListener('hashchange', show);

try {
  const s = await get('auth/session');
  signedIn(s.username, s.csrf_token);
} catch (err) {
  if (!(err instanceof ApiError && err.status === 401)) {
    main.replaceChildren(h('p', { class: 'error', role: 'alert', text: errorText(err) }));
  } else {
    show();
  }
}
