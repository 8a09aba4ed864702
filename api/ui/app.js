// The Manual Scheduler: esi's Testbeds, BatchJobs and Schedulings as they change, and a builder for new
// Schedulings — over the same REST routes and STOMP topics an external scheduler uses.
//
// How the page stays current: for each kind it subscribes to /topic/<kind> (a name per change), then lists
// the kind over REST, then subscribes to /topic/<kind>/<name> for each object (which carries the object's
// whole view). Each SUBSCRIBE waits for its receipt before the matching REST read, so no change falls
// between the two; a change announced on the kind's topic while an object's own subscription is still
// pending is read again over REST once it is in place. After a reconnect everything is listed again.

import { duration, time } from './format.js';
import { Gantt } from './gantt.js';
import { ESI_STATE_NAMES } from './states.js';
import { StompClient } from './stomp.js';

const TOKEN_KEY = 'esi.token';
const API_ROOT = new URL('../', window.location.href); // the page is served at <API root>/ui/
const ACTIVITY_LIMIT = 300;
const KINDS = ['testbeds', 'jobs', 'schedulings'];
// States are shown in esi's names, as kubectl shows them: an object's esiState; a slot's and a job entry's
// (only the original's names on the wire) as the server's ESI_STATE_NAMES names them, in the order of their life.
const slotState = (slot) => ESI_STATE_NAMES.slot[slot.state] ?? slot.state;
const jobState = (entry) => ESI_STATE_NAMES.job[entry.state] ?? entry.state;
const JOB_STATE_ORDER = [...new Set(Object.values(ESI_STATE_NAMES.job))];

const $ = (id) => document.getElementById(id);

// --- DOM helper: h('tag.class', {attributes, on: {event: handler}}, ...children) -------------------------

function h(spec, attributes = {}, ...children) {
  const [tag, ...classes] = spec.split('.');
  const element = document.createElement(tag || 'div');
  if (classes.length) element.className = classes.join(' ');
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'on') {
      for (const [event, handler] of Object.entries(value)) element.addEventListener(event, handler);
    } else if (name === 'testid') {
      element.dataset.testid = value;
    } else if (name === 'data') {
      for (const [key, item] of Object.entries(value)) {
        if (item !== undefined && item !== null) element.dataset[key] = String(item);
      }
    } else if (name === 'class') {
      element.className = [element.className, value].filter(Boolean).join(' ');
    } else if (value === true) {
      element.setAttribute(name, '');
    } else {
      element.setAttribute(name, String(value));
    }
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

/** A select's options: `names`, or one saying `empty`; what is chosen stays chosen, an open list open. */
function fillSelect(select, names, empty) {
  const shown = [...select.options].map((option) => option.value);
  if (JSON.stringify(shown) === JSON.stringify(names.length ? names : [''])) return;
  const chosen = select.value;
  select.replaceChildren(...(names.length ? names : [null]).map((name) => h('option', { value: name ?? '' }, name ?? empty)));
  if (names.includes(chosen)) select.value = chosen;
}

/** A state as a coloured badge; its title lists the object's conditions (type, status, reason, message). */
function badge(state, testid, conditions) {
  const title = (conditions ?? [])
    .map((c) => `${c.type}=${c.status}${c.reason ? ` (${c.reason})` : ''}${c.message ? `: ${c.message}` : ''}`)
    .join('\n');
  return h('span.badge', { testid, data: { state }, title: title || null }, state ?? 'unknown');
}

// --- state ------------------------------------------------------------------------------------------

const state = {
  token: sessionStorage.getItem(TOKEN_KEY),
  namespace: new URLSearchParams(window.location.search).get('namespace') ?? '',
  serverNamespace: '',
  testbeds: new Map(),
  jobs: new Map(),
  schedulings: new Map(),
  expandedJobs: new Set(),
};

// --- REST -------------------------------------------------------------------------------------------

/** A refusal of the API, in its one shape: a sentence and per-field problems. */
class ApiError extends Error {
  constructor(status, message, errors = []) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.errors = errors;
  }
}

async function api(path, { method = 'GET', body } = {}) {
  const url = new URL(`external/${path}`, API_ROOT);
  url.searchParams.set('view', 'esi'); // the original's fields and esi's own (waitingFor, esiState, …)
  if (state.namespace) url.searchParams.set('namespace', state.namespace);
  const headers = { Accept: 'application/json', Authorization: `Bearer ${state.token}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (error) {
    throw new ApiError(0, `esi could not be reached (${error.message})`);
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const detail = data?.detail;
    const message = typeof detail === 'string' ? detail : detail?.message ?? `${response.status} ${response.statusText}`;
    const error = new ApiError(response.status, message, Array.isArray(detail?.errors) ? detail.errors : []);
    if (response.status === 401) signOut(error.message);
    throw error;
  }
  return { status: response.status, data };
}

// --- flash messages -----------------------------------------------------------------------------------

function flash(kind, message, problems = []) {
  const item = h(
    'div.flash-message',
    { testid: 'flash-message', data: { kind }, role: kind === 'error' ? 'alert' : 'status' },
    h('div.flash-text', {}, message),
    problems.length
      ? h('ul.problems', {}, problems.map((p) => h('li', { testid: 'flash-problem', data: { field: p.field } },
        h('code', {}, p.field), ': ', p.problem)))
      : null,
    h('button.dismiss', { type: 'button', title: 'Dismiss', testid: 'flash-dismiss', on: { click: () => item.remove() } }, '×'),
  );
  $('flash').prepend(item);
  if (kind !== 'error') setTimeout(() => item.remove(), 8000);
  while ($('flash').children.length > 5) $('flash').lastElementChild.remove();
}

const flashError = (what, error) => flash('error', `${what}: ${error.message}`, error.errors ?? []);

// --- activity log -----------------------------------------------------------------------------------

function activity(kind, text, data = {}) {
  const stamp = new Date();
  const list = $('activity');
  list.prepend(h('li', { testid: 'activity-entry', data: { kind, at: stamp.toISOString(), ...data } },
    h('time', {}, stamp.toLocaleTimeString([], { hour12: false }) + `.${String(stamp.getMilliseconds()).padStart(3, '0')}`),
    h('span', {}, text)));
  while (list.children.length > ACTIVITY_LIMIT) list.lastElementChild.remove();
}

function slotsOf(testbed) {
  return Object.values(testbed?.slotsByNode ?? {}).flat();
}

/** What changed between two views of an object, for the activity log. */
function noteChange(kind, name, before, after) {
  if (kind === 'testbeds') {
    if (!before || !after) {
      activity('testbed', `Testbed ${name} ${after ? 'appeared' : 'is gone'}`, { name });
      return;
    }
    const old = new Map(slotsOf(before).map((s) => [s.position, s]));
    for (const slot of slotsOf(after)) {
      const previous = old.get(slot.position);
      const [from, to] = previous ? [slotState(previous), slotState(slot)] : [];
      if (from !== to) {
        const job = slot.reservedFor ?? previous.reservedFor;
        activity('slot', `${name} slot ${slot.position}: ${from} → ${to}${job ? ` (${job})` : ''}`,
          { testbed: name, slot: slot.position, from, to, job, pod: slot.podName });
      }
    }
    if (before.esiState !== after.esiState) {
      activity('testbed', `Testbed ${name}: ${before.esiState} → ${after.esiState}`,
        { name, from: before.esiState, to: after.esiState });
    }
  } else if (kind === 'jobs') {
    if (before && after && before.esiState !== after.esiState) {
      activity('job', `BatchJob ${name}: ${before.esiState} → ${after.esiState}`,
        { name, from: before.esiState, to: after.esiState });
    }
  } else if (kind === 'schedulings') {
    if (!before || !after) {
      activity('scheduling', `Scheduling ${name} ${after ? 'appeared' : 'is gone'}`, { name, to: after?.esiState });
    } else if (before.esiState !== after.esiState) {
      activity('scheduling', `Scheduling ${name}: ${before.esiState} → ${after.esiState}`,
        { name, from: before.esiState, to: after.esiState });
    }
  }
}

// --- feeds: one per kind, kept current over STOMP ----------------------------------------------------

class Feed {
  constructor(kind, items, onChange) {
    this.kind = kind;
    this.items = items;
    this.onChange = onChange;
    this.generation = 0;
    this.stomp = null;
    this.listing = null; // the id of the subscription to /topic/<kind>
    this.tracked = new Map(); // name → {id, ready, dirty}: the subscriptions to /topic/<kind>/<name>
    this.sequence = 0; // counts messages, so a REST answer older than a message is dropped
    this.lastMessage = new Map();
  }

  headers() {
    return state.namespace ? { namespace: state.namespace, view: 'esi' } : { view: 'esi' };
  }

  /** (Re)start on a new connection or namespace: subscribe to the kind, list it, follow each object. */
  async start(stomp) {
    this.#unsubscribe();
    const generation = ++this.generation;
    this.stomp = stomp;
    this.listing = await stomp.subscribe(`/topic/${this.kind}`, this.headers(), (body) => this.#listing(stomp, generation, body));
    const asked = this.sequence;
    const { data } = await api(this.kind);
    if (generation !== this.generation) return;
    const views = Array.isArray(data) ? data : Object.values(data ?? {});
    const listed = new Set(views.map((view) => view.name));
    for (const name of [...this.items.keys()]) if (!listed.has(name)) this.#set(name, null);
    for (const view of views) {
      if ((this.lastMessage.get(view.name) ?? -1) <= asked) this.#set(view.name, view);
      this.#track(stomp, generation, view.name, false);
    }
  }

  /** Forget everything (another namespace, or signed out). */
  clear() {
    this.#unsubscribe();
    this.generation += 1;
    for (const name of [...this.items.keys()]) this.items.delete(name);
    this.onChange(this.kind, null, null, null);
  }

  // Ends this feed's subscriptions on the current connection (a no-op for those of a lost one).
  #unsubscribe() {
    if (this.stomp?.connected) {
      if (this.listing) this.stomp.unsubscribe(this.listing);
      for (const tracked of this.tracked.values()) if (tracked.id) this.stomp.unsubscribe(tracked.id);
    }
    this.listing = null;
    this.tracked.clear();
  }

  #set(name, view) {
    const before = this.items.get(name) ?? null;
    if (view === null) this.items.delete(name);
    else this.items.set(name, view);
    if (before !== null || view !== null) this.onChange(this.kind, name, before, view);
  }

  #listing(stomp, generation, body) {
    if (generation !== this.generation) return;
    const { action, resource: name } = JSON.parse(body);
    if (action === 'DELETED') {
      const tracked = this.tracked.get(name);
      this.tracked.delete(name);
      if (tracked?.id) stomp.unsubscribe(tracked.id);
      this.#set(name, null);
      return;
    }
    const tracked = this.tracked.get(name);
    if (tracked === undefined) this.#track(stomp, generation, name, true);
    else if (!tracked.ready) tracked.dirty = true;
  }

  #track(stomp, generation, name, dirty) {
    if (this.tracked.has(name)) return;
    const tracked = { id: null, ready: false, dirty };
    this.tracked.set(name, tracked);
    const destination = `/topic/${this.kind}/${name}`;
    stomp.subscribe(destination, this.headers(), (body) => this.#message(generation, name, body))
      .then((id) => {
        tracked.id = id;
        tracked.ready = true;
        if (this.tracked.get(name) !== tracked || generation !== this.generation) {
          stomp.unsubscribe(id);
        } else if (tracked.dirty) {
          this.#refresh(generation, name);
        }
      })
      .catch(() => {}); // the connection went: the next one starts over
  }

  #message(generation, name, body) {
    if (generation !== this.generation) return;
    const { action, resource } = JSON.parse(body);
    this.sequence += 1;
    this.lastMessage.set(name, this.sequence);
    this.#set(name, action === 'DELETED' ? null : resource);
  }

  async #refresh(generation, name) {
    const asked = this.sequence;
    let view;
    try {
      ({ data: view } = await api(`${this.kind}/${encodeURIComponent(name)}`));
    } catch (error) {
      if (error.status !== 404) return;
      view = null;
    }
    if (generation !== this.generation || (this.lastMessage.get(name) ?? -1) > asked) return;
    this.#set(name, view);
  }
}

const rendering = new Set();
function changed(kind, name, before, after) {
  if (name !== null) noteChange(kind, name, before, after);
  if (!rendering.size) setTimeout(renderChanged, 0);
  rendering.add(kind);
}

const feeds = {
  testbeds: new Feed('testbeds', state.testbeds, changed),
  jobs: new Feed('jobs', state.jobs, changed),
  schedulings: new Feed('schedulings', state.schedulings, changed),
};

function renderChanged() {
  const kinds = new Set(rendering);
  rendering.clear();
  if (kinds.has('testbeds')) renderTestbeds();
  if (kinds.has('jobs')) renderJobs();
  if (kinds.has('schedulings')) renderSchedulings();
  if (kinds.has('testbeds') || kinds.has('jobs')) {
    builder.refreshChoices();
    renderGantt();
  }
}

// --- connection -------------------------------------------------------------------------------------

let stomp = null;

function websocketUrl() {
  const url = new URL('scheduler', API_ROOT);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  url.searchParams.set('access_token', state.token);
  return url.toString();
}

function showStatus({ state: connection, attempt, delay, reason }) {
  const element = $('connection-status');
  element.dataset.state = connection;
  const texts = {
    connecting: 'connecting…',
    connected: 'live',
    reconnecting: delay === undefined
      ? `reconnecting (attempt ${attempt})…`
      : `reconnecting in ${(delay / 1000).toFixed(1)} s (${reason})`,
    stopped: `not connected${reason && reason !== 'stopped' ? `: ${reason}` : ''}`,
  };
  element.textContent = texts[connection] ?? connection;
  $('reconnect').hidden = connection !== 'stopped' || !state.token;
  if (connection === 'reconnecting' && delay !== undefined) activity('connection', `connection lost: ${reason}`);
}

async function followAll() {
  try {
    await Promise.all(KINDS.map((kind) => feeds[kind].start(stomp)));
  } catch (error) {
    if (error.name === 'ApiError') flashError('Could not read esi', error);
    // a StompError: the connection went (or a subscription was refused, told by onError); it starts over
  }
}

function onStompError(frame) {
  const message = frame.headers.message || 'refused';
  if (message.startsWith('unauthenticated')) {
    signOut(`The live connection was refused: ${message}`);
  } else if (message.startsWith('forbidden')) {
    stomp.stop(message);
    flash('error', `Live updates refused: ${message}`);
  } else {
    activity('connection', `esi closed the live connection: ${message}`);
  }
}

function connect() {
  stomp?.stop();
  stomp = new StompClient({
    url: websocketUrl(),
    heartbeat: [10000, 10000],
    onStatus: showStatus,
    onConnect: () => {
      activity('connection', 'connected');
      followAll();
    },
    onError: onStompError,
  });
  stomp.start();
}

// --- sign in / out, namespace -----------------------------------------------------------------------

/** Ask esi for the overview: is the token accepted, and which namespace is the server's default? */
async function learnNamespace() {
  const { data } = await api('overview');
  if (!state.namespace) state.serverNamespace = data.namespace;
}

async function signIn(token) {
  state.token = token;
  try {
    await learnNamespace();
  } catch (error) {
    if (error.status === 401 || error.status === 0) {
      state.token = null;
      $('login-error').textContent = error.status === 401 ? `Not accepted: ${error.message}` : error.message;
      return false;
    }
    // The token is good; this namespace is not (403, 422): say so, and let the user pick another.
    flashError('Could not read esi', error);
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  $('login').hidden = true;
  $('main').hidden = false;
  $('logout').hidden = false;
  $('login-error').textContent = '';
  showNamespace();
  connect();
  return true;
}

function signOut(reason = '') {
  stomp?.stop();
  stomp = null;
  state.token = null;
  sessionStorage.removeItem(TOKEN_KEY);
  for (const kind of KINDS) feeds[kind].clear();
  $('main').hidden = true;
  $('logout').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = reason;
  $('login-token').focus();
}

function showNamespace() {
  $('namespace-input').value = state.namespace;
  const shown = state.namespace || state.serverNamespace || 'default namespace';
  $('namespace-current').textContent = state.namespace ? '' : `(${state.serverNamespace || "the server's default"})`;
  document.title = `esi · ${shown} · Manual Scheduler`;
}

async function switchNamespace(namespace) {
  if (namespace === state.namespace) return;
  const url = new URL(window.location.href);
  if (namespace) url.searchParams.set('namespace', namespace);
  else url.searchParams.delete('namespace');
  window.history.replaceState(null, '', url);
  state.namespace = namespace;
  if (!namespace && !state.serverNamespace) await learnNamespace().catch(() => {});
  showNamespace();
  activity('connection', `namespace ${namespace || state.serverNamespace}`);
  for (const kind of KINDS) feeds[kind].clear();
  builder.clear();
  if (stomp?.connected) await followAll();
  else stomp?.restart();
}

// --- Testbeds ---------------------------------------------------------------------------------------

/** A Testbed's slots as the grid shows them: nodes by node id, each node's slots by position on it. */
function layout(testbed) {
  const nodes = Object.entries(testbed?.slotsByNode ?? {}).map(([node, slots]) => ({
    node,
    id: slots[0]?.nodeId ?? 0,
    slots: [...slots].sort((a, b) => a.slotPositionOnNode - b.slotPositionOnNode),
  }));
  return nodes.sort((a, b) => a.id - b.id || a.node.localeCompare(b.node));
}

function slotCell(testbed, slot) {
  const job = slot.reservedFor;
  const noRoom = slot.noRoom ? ` · no room: ${slot.noRoom}` : '';
  const shown = slotState(slot);
  return h(`div.slot.${shown.toLowerCase()}`, {
    testid: `slot-${testbed}-${slot.position}`,
    data: { state: shown, job: job ?? '', pod: slot.podName ?? '', slot: slot.position, noRoom: slot.noRoom ?? '' },
    title: `slot ${slot.position} · ${shown}${job ? ` · ${job}` : ''}${slot.podName ? ` · pod ${slot.podName}` : ''}${noRoom}`,
  },
  h('span.slot-id', {}, `#${slot.position}`),
  h('span.slot-state', {}, shown),
  h('span.slot-job', { testid: `slot-job-${testbed}-${slot.position}` }, job ?? (shown === 'Free' ? 'empty' : '—')),
  h('span.slot-pod', { testid: `slot-pod-${testbed}-${slot.position}` }, slot.podName ?? ''),
  h('span.slot-no-room', { testid: `slot-no-room-${testbed}-${slot.position}` }, slot.noRoom ? 'no room' : ''));
}

function renderTestbeds() {
  const container = $('testbeds');
  const testbeds = [...state.testbeds.values()].sort((a, b) => a.name.localeCompare(b.name));
  if (!testbeds.length) {
    container.replaceChildren(h('p.empty', { testid: 'testbeds-empty' }, 'No Testbeds in this namespace.'));
    return;
  }
  container.replaceChildren(...testbeds.map((testbed) => {
    const slots = slotsOf(testbed);
    const count = (s) => slots.filter((slot) => slotState(slot) === s).length;
    const nodes = layout(testbed);
    const grid = h('div.nodes', {});
    grid.style.setProperty('--columns', String(Math.max(nodes.length, 1)));
    grid.append(...nodes.map(({ node, id, slots: column }) => h('div.node', { testid: `node-${testbed.name}-${node}` },
      h('div.node-head', { title: node }, h('strong', {}, node), h('small', {}, ` node ${id}`)),
      column.map((slot) => slotCell(testbed.name, slot)))));
    return h('article.testbed', { testid: `testbed-${testbed.name}`, data: { name: testbed.name, state: testbed.esiState } },
      h('header', {},
        h('h3', {}, testbed.name),
        badge(testbed.esiState, `testbed-state-${testbed.name}`, testbed.conditions),
        h('span.counts', { testid: `testbed-counts-${testbed.name}` },
          Object.values(ESI_STATE_NAMES.slot).map((s) => `${count(s)} ${s.toLowerCase()}`).join(' · ')),
        testbed.heldBy ? h('span.held', {}, 'held by ', h('strong', {}, testbed.heldBy)) : null),
      testbed.message ? h('p.message', {}, testbed.message) : null,
      nodes.length ? grid : h('p.empty', {}, 'No slots yet.'),
      h('p.muted.small', {}, `${testbed.numberOfNodes} nodes × ${testbed.numberOfSlotsPerNode} slots`));
  }));
}

// --- the runs on a Testbed, as a Gantt chart ----------------------------------------------------------

const gantt = new Gantt($('gantt-chart'), $('gantt-empty'));
window.esiGantt = gantt; // its Vega view, for a person at the console and the browser test

function renderGantt() {
  fillSelect($('gantt-testbed'), [...state.testbeds.keys()].sort(), 'no Testbeds');
  gantt.show(state.testbeds.get($('gantt-testbed').value) ?? null, [...state.jobs.values()]);
}

// --- BatchJobs --------------------------------------------------------------------------------------

function outcome(event) {
  if (event.successful === true) return h('span.outcome.ok', {}, 'succeeded');
  if (event.successful === false) return h('span.outcome.failed', {}, 'failed');
  return h('span.outcome.running', {}, event.stop ? 'ended' : 'running');
}

function history(job) {
  const events = [...(job.scheduledEvents ?? [])].reverse();
  if (!events.length) return h('p.empty', { testid: `job-history-${job.name}` }, 'No runs yet.');
  return h('table.history', { testid: `job-history-${job.name}` },
    h('thead', {}, h('tr', {}, ['Started', 'Ended', 'Duration', 'Outcome', 'Scheduling', 'Attempt', 'Slots', 'Nodes',
      'Co-located with'].map((title) => h('th', {}, title)))),
    h('tbody', {}, events.map((event) => h('tr', { testid: 'run' },
      h('td', { title: event.start }, time(event.start)),
      h('td', { title: event.stop ?? '' }, time(event.stop)),
      h('td', {}, duration(event.start, event.stop)),
      h('td', {}, outcome(event)),
      h('td', {}, event.scheduling?.name ?? '—'),
      h('td', {}, event.attempt),
      h('td', {}, (event.slots ?? []).join(', ')),
      h('td', { title: event.incomplete ?? '' }, (event.nodes ?? []).join(', ') || (event.incomplete ? 'unknown' : '—')),
      h('td', { title: event.incomplete ?? '' },
        (event.colocatedJobs ?? []).join(', ') || (event.incomplete ? 'unknown' : '—'))))));
}

function renderJobs() {
  const jobs = [...state.jobs.values()].sort((a, b) => a.name.localeCompare(b.name));
  if (!jobs.length) {
    $('jobs').replaceChildren(h('p.empty', { testid: 'jobs-empty' }, 'No BatchJobs in this namespace.'));
    return;
  }
  const rows = jobs.flatMap((job) => {
    const open = state.expandedJobs.has(job.name);
    const runs = job.scheduledEvents ?? [];
    const last = runs[runs.length - 1];
    const toggle = () => {
      if (open) state.expandedJobs.delete(job.name);
      else state.expandedJobs.add(job.name);
      renderJobs();
    };
    const row = h('tr.job', { testid: `job-row-${job.name}`, data: { name: job.name, state: job.esiState } },
      h('td', {}, h('button.toggle', { type: 'button', testid: `job-toggle-${job.name}`, 'aria-expanded': String(open),
        title: open ? 'Hide runs' : 'Show runs', on: { click: toggle } }, open ? '▾' : '▸')),
      h('td', {}, h('strong', {}, job.name)),
      h('td', {}, badge(job.esiState, `job-state-${job.name}`, job.conditions)),
      h('td', {}, String(runs.length)),
      h('td', {}, last ? [outcome(last), ' ', h('span.muted', {}, time(last.start))] : '—'),
      h('td.message', {}, job.message ?? ''));
    const notes = job.externalScheduler
      ? h('details.notes', {}, h('summary', {}, 'externalScheduler data'),
        h('pre', { testid: `job-notes-${job.name}` }, JSON.stringify(job.externalScheduler, null, 2)))
      : null;
    return open ? [row, h('tr.details', {}, h('td', { colspan: 6 }, history(job), notes))] : [row];
  });
  $('jobs').replaceChildren(h('table.jobs', {},
    h('thead', {}, h('tr', {}, ['', 'Name', 'State', 'Runs', 'Last run', 'Message'].map((t) => h('th', {}, t)))),
    h('tbody', {}, rows)));
}

// --- Schedulings ------------------------------------------------------------------------------------

function strategy(scheduling) {
  if (scheduling.queue) return h('span', {}, h('span.tag', {}, 'queue'), ' ', scheduling.queue.join(' → '));
  const slots = scheduling.slots;
  if (!slots) return '—';
  return h('span', {}, h('span.tag', {}, slots.mode.toLowerCase()), ' ',
    slots.jobs.map((job) => `${job.name} [${job.slots.join(', ')}]`).join(', '));
}

function progress(scheduling) {
  const entries = scheduling.jobStatus ?? [];
  const done = entries.filter((entry) => jobState(entry) === 'Completed').length;
  const bar = h('div.bar', { title: `${done} of ${entries.length} completed` }, h('div.fill', {}));
  bar.firstChild.style.setProperty('--done', String(entries.length ? done / entries.length : 0));
  const chips = [...entries]
    .sort((a, b) => JOB_STATE_ORDER.indexOf(jobState(a)) - JOB_STATE_ORDER.indexOf(jobState(b)))
    .map((entry) => h('span.chip', { testid: 'job-status', data: { job: entry.name, state: jobState(entry) } },
      entry.name, ' ', h('small', {}, jobState(entry))));
  return h('div.progress', { testid: `scheduling-progress-${scheduling.name}` },
    h('div.progress-line', {}, bar, h('small', {}, `${done}/${entries.length}`)), h('div.chips', {}, chips));
}

async function deleteScheduling(name) {
  if (!window.confirm(`Delete Scheduling ${name}? Its Testbed and BatchJobs are released.`)) return;
  try {
    await api(`schedulings/${encodeURIComponent(name)}`, { method: 'DELETE' });
    flash('success', `Scheduling ${name} is being deleted.`);
  } catch (error) {
    flashError(`Scheduling ${name} was not deleted`, error);
  }
}

function renderSchedulings() {
  const schedulings = [...state.schedulings.values()].sort((a, b) => a.name.localeCompare(b.name));
  if (!schedulings.length) {
    $('schedulings').replaceChildren(h('p.empty', { testid: 'schedulings-empty' }, 'No Schedulings in this namespace.'));
    return;
  }
  $('schedulings').replaceChildren(...schedulings.map((scheduling) => h('article.scheduling', {
    testid: `scheduling-${scheduling.name}`, data: { name: scheduling.name, state: scheduling.esiState },
  },
  h('header', {},
    h('h3', {}, scheduling.name),
    badge(scheduling.esiState, `scheduling-state-${scheduling.name}`, scheduling.conditions),
    h('span.muted', {}, 'on ', h('strong', {}, scheduling.testBed)),
    h('span.spacer', {}),
    h('button', { type: 'button', testid: `scheduling-edit-${scheduling.name}`, title: 'Load into the builder to change it',
      on: { click: () => builder.load(scheduling) } }, 'Edit'),
    h('button.danger', { type: 'button', testid: `scheduling-delete-${scheduling.name}`,
      on: { click: () => deleteScheduling(scheduling.name) } }, 'Delete')),
  h('div.strategy', {}, strategy(scheduling)),
  progress(scheduling),
  scheduling.waitingFor
    ? h('p.waiting', { testid: `scheduling-waiting-${scheduling.name}` }, 'waiting for ', scheduling.waitingFor)
    : null)));
}

// --- the builder ------------------------------------------------------------------------------------

const builder = {
  entries: [], // {job, slots: Set of slot ids}

  mode() {
    return document.querySelector('input[name="mode"]:checked').value;
  },

  testbed() {
    return state.testbeds.get($('builder-testbed').value) ?? null;
  },

  /** The request body, as the API takes it (what the user built, checked by the API, not here). */
  body() {
    const body = { name: $('builder-name').value.trim(), testBed: $('builder-testbed').value };
    if (this.mode() === 'queue') {
      body.queue = this.entries.map((entry) => entry.job);
    } else {
      body.slots = {
        mode: $('builder-strict').checked ? 'STRICT' : 'RELAXED',
        jobs: this.entries.map((entry) => ({ name: entry.job, slots: [...entry.slots].sort((a, b) => a - b) })),
      };
    }
    return body;
  },

  /** The options of the testbed and job selects, keeping what is chosen. */
  refreshChoices() {
    fillSelect($('builder-testbed'), [...state.testbeds.keys()].sort(), 'no Testbeds');
    fillSelect($('builder-job'), [...state.jobs.keys()].sort(), 'no BatchJobs');
    this.render();
  },

  add() {
    const job = $('builder-job').value;
    if (!job) {
      flash('info', 'There is no BatchJob to add in this namespace.');
      return;
    }
    this.entries.push({ job, slots: new Set() });
    this.render();
  },

  move(index, by) {
    const [entry] = this.entries.splice(index, 1);
    this.entries.splice(Math.min(Math.max(index + by, 0), this.entries.length), 0, entry);
    this.render();
  },

  remove(index) {
    this.entries.splice(index, 1);
    this.render();
  },

  toggle(index, slot) {
    const { slots } = this.entries[index];
    if (slots.has(slot)) slots.delete(slot);
    else slots.add(slot);
    this.render();
  },

  clear() {
    this.entries = [];
    $('builder-name').value = '';
    this.render();
  },

  /** Put an existing Scheduling into the builder: submitting it again replaces its jobs. */
  load(scheduling) {
    $('builder-name').value = scheduling.name;
    if (state.testbeds.has(scheduling.testBed)) $('builder-testbed').value = scheduling.testBed;
    const slots = scheduling.slots;
    document.querySelector(`input[name="mode"][value="${slots ? 'slots' : 'queue'}"]`).checked = true;
    if (slots) $('builder-strict').checked = slots.mode.toUpperCase() === 'STRICT';
    this.entries = slots
      ? slots.jobs.map((job) => ({ job: job.name, slots: new Set(job.slots) }))
      : (scheduling.queue ?? []).map((job) => ({ job, slots: new Set() }));
    this.render();
    $('builder-name').scrollIntoView({ block: 'center' });
    flash('info', `Scheduling ${scheduling.name} is in the builder: submitting it replaces its jobs.`);
  },

  /** A grid of the Testbed's slot ids, laid out as the Testbed is (columns = nodes, rows = positions). */
  grid(index, entry) {
    const testbed = this.testbed();
    const nodes = layout(testbed);
    if (!nodes.length) return h('p.empty', {}, testbed ? 'This Testbed has no slots yet.' : 'Choose a Testbed.');
    const elsewhere = new Map();
    this.entries.forEach((other, i) => {
      if (i !== index) for (const slot of other.slots) elsewhere.set(slot, other.job);
    });
    const grid = h('div.slot-grid', { testid: `builder-grid-${index}`, role: 'group', 'aria-label': `Slots of ${entry.job}` });
    grid.style.setProperty('--columns', String(nodes.length));
    const rows = Math.max(...nodes.map((node) => node.slots.length));
    for (let row = 0; row < rows; row += 1) {
      for (const node of nodes) {
        const slot = node.slots[row];
        if (!slot) {
          grid.append(h('span.cell.none', {}));
          continue;
        }
        const chosen = entry.slots.has(slot.position);
        const other = elsewhere.get(slot.position);
        grid.append(h(`button.cell.${slotState(slot).toLowerCase()}`, {
          type: 'button',
          testid: `builder-slot-${index}-${slot.position}`,
          'aria-pressed': String(chosen),
          class: [chosen ? 'chosen' : '', other ? 'taken' : ''].filter(Boolean).join(' '),
          title: `slot ${slot.position} on ${node.node} (now ${slotState(slot).toLowerCase()})${other ? `; also chosen for ${other}` : ''}`,
          on: { click: () => this.toggle(index, slot.position) },
        }, String(slot.position)));
      }
    }
    return grid;
  },

  render() {
    const slotMode = this.mode() === 'slots';
    $('builder-strict-label').hidden = !slotMode;
    const list = $('builder-entries');
    list.classList.toggle('slot-mode', slotMode);
    const last = this.entries.length - 1;
    list.replaceChildren(...this.entries.map((entry, index) => h('li.entry', { testid: `builder-entry-${index}`, data: { job: entry.job } },
      h('div.entry-head', {},
        h('strong', {}, entry.job),
        slotMode ? h('small.muted', {}, entry.slots.size ? ` slots ${[...entry.slots].sort((a, b) => a - b).join(', ')}` : ' no slots chosen') : null,
        h('span.spacer', {}),
        h('button', { type: 'button', testid: `builder-up-${index}`, title: 'Earlier', disabled: index === 0, on: { click: () => this.move(index, -1) } }, '↑'),
        h('button', { type: 'button', testid: `builder-down-${index}`, title: 'Later', disabled: index === last, on: { click: () => this.move(index, 1) } }, '↓'),
        h('button', { type: 'button', testid: `builder-remove-${index}`, title: 'Remove', on: { click: () => this.remove(index) } }, '×')),
      slotMode ? this.grid(index, entry) : null)));
    if (!this.entries.length) list.append(h('li.empty', {}, 'Add BatchJobs: a queue runs them in order on any free slots; with slots, each runs on the ones you pick.'));
    $('builder-preview').textContent = JSON.stringify(this.body(), null, 2);
  },

  async submit() {
    const body = this.body();
    try {
      const { status, data } = await api('schedulings', { method: 'POST', body });
      flash('success', `Scheduling ${data.name} ${status === 201 ? 'created' : 'replaced'} (${data.esiState}).`);
      activity('scheduling', `submitted Scheduling ${data.name}`, { name: data.name });
    } catch (error) {
      flashError(`Scheduling ${body.name || '(no name)'} was not accepted`, error);
    }
  },
};

// --- wiring -----------------------------------------------------------------------------------------

function wire() {
  $('login-form').addEventListener('submit', (event) => {
    event.preventDefault();
    signIn($('login-token').value.trim());
  });
  $('logout').addEventListener('click', () => signOut());
  $('reconnect').addEventListener('click', () => stomp?.restart());
  $('namespace-form').addEventListener('submit', (event) => {
    event.preventDefault();
    switchNamespace($('namespace-input').value.trim());
  });
  $('builder-form').addEventListener('submit', (event) => {
    event.preventDefault();
    builder.submit();
  });
  $('builder-add-job').addEventListener('click', () => builder.add());
  $('builder-reset').addEventListener('click', () => builder.clear());
  $('builder-testbed').addEventListener('change', () => builder.render());
  $('builder-strict').addEventListener('change', () => builder.render());
  $('builder-name').addEventListener('input', () => builder.render());
  for (const radio of document.querySelectorAll('input[name="mode"]')) radio.addEventListener('change', () => builder.render());
  $('activity-clear').addEventListener('click', () => $('activity').replaceChildren());
  $('gantt-testbed').addEventListener('change', () => renderGantt());
  window.addEventListener('resize', () => renderGantt());
  // Durations of running runs grow: redraw the open histories, and the chart's open bars, now and then.
  setInterval(() => {
    if (state.expandedJobs.size) renderJobs();
    if (gantt.running) renderGantt();
  }, 5000);
}

wire();
builder.refreshChoices();
renderTestbeds();
renderJobs();
renderSchedulings();
renderGantt();
if (state.token) {
  signIn(state.token).then((ok) => ok || $('login').removeAttribute('hidden'));
} else {
  signOut();
}
