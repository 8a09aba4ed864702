// The Gantt view of a Testbed's recent runs: a row per slot, grouped by node, and a bar per run in each slot
// it used, coloured by job; failed runs outlined red, cancelled ones dashed, each bar's tooltip says the rest
// (and why it failed). The runs are the BatchJobs' recent histories (scheduledEvents in esi's view, which the
// page keeps current over STOMP); a run still going reaches to now. Drawn by Vega-Lite through vega-embed
// (api/ui/vendor/, loaded by index.html as classic scripts), in SVG, with vega-embed's expression interpreter
// (`ast`): the page's Content-Security-Policy allows no eval, and no inline styles (`defaultStyle`, the
// tooltip's look is in style.css).

import { duration, time } from './format.js';

const DATA = 'gantt';
const GONE = 'not in the slot table now';
const FAILED = '#b42318'; // style.css's --error
const LANE = '#f6f7f9'; // style.css's pre background
// Vega's tableau10 without its red, which would read as a failure.
const JOB_COLOURS = ['#4c78a8', '#f58518', '#54a24b', '#72b7b2', '#eeca3b', '#b279a2', '#ff9da6', '#9d755d', '#bab0ac'];
const OUTCOME = { Succeeded: 'succeeded', Failed: 'failed', Cancelled: 'cancelled' };
const IS_FAILED = "datum.outcome === 'failed' || datum.outcome === 'cancelled'";
const LABELS = 80; // px left of the bars: the slot labels

/**
 * The chart's data: a lane per slot of the Testbed (`kind: 'slot'`), and a bar per run and slot it used
 * (`kind: 'run'`), for the runs of `jobs` on that Testbed; open runs end at `now` (ms).
 */
export function ganttRows(testbed, jobs, now) {
  const lanes = new Map();
  for (const [node, slots] of Object.entries(testbed.slotsByNode ?? {})) {
    for (const slot of slots) lanes.set(slot.position, { kind: 'slot', slot: slot.position, node, nodeId: slot.nodeId });
  }
  const bars = [];
  for (const job of jobs) {
    for (const run of job.scheduledEvents ?? []) {
      if (run.testbed !== testbed.name) continue;
      const outcome = run.stop ? OUTCOME[run.outcome] ?? 'ended' : 'running';
      const tooltip = {
        job: job.name,
        Scheduling: run.scheduling?.name ?? '—',
        attempt: run.attempt,
        slots: run.slots.join(', '),
        nodes: run.nodes.join(', ') || (run.incomplete ? 'unknown' : '—'),
        start: time(run.start),
        end: run.stop ? time(run.stop) : 'running',
        runtime: duration(run.start, run.stop),
        outcome,
        ...(run.reason ? { reason: run.reason } : {}),
      };
      for (const slot of run.slots) {
        if (!lanes.has(slot)) lanes.set(slot, { kind: 'slot', slot, node: GONE, nodeId: Number.MAX_SAFE_INTEGER });
        bars.push({
          kind: 'run',
          job: job.name,
          slot,
          node: lanes.get(slot).node,
          start: Date.parse(run.start),
          end: run.stop ? Date.parse(run.stop) : now,
          outcome,
          tooltip,
          description: `${job.name} run ${run.attempt} in slot ${slot}: ${tooltip.start} to ${tooltip.end}, ${outcome}`,
        });
      }
    }
  }
  return [...lanes.values(), ...bars];
}

/** The chart: a part per node (`nodes`, top to bottom), its slots' lanes and bars, on one time axis. */
function spec(width, nodes, rows) {
  const y = { field: 'slot', type: 'ordinal', title: null, axis: { labelExpr: "'slot ' + datum.label", ticks: false } };
  const lanes = { transform: [{ filter: "datum.kind === 'slot'" }], mark: { type: 'rect', fill: LANE, aria: false }, encoding: { y } };
  const bars = (labelled) => ({
    transform: [{ filter: "datum.kind === 'run'" }],
    mark: { type: 'bar', cornerRadius: 3, height: { band: 0.7 }, tooltip: { expr: 'datum.tooltip' } },
    encoding: {
      x: {
        field: 'start',
        type: 'temporal',
        title: null,
        // every part has the grid; only the lowest the times
        axis: labelled ? { format: '%H:%M:%S', labelFlush: false } : { labels: false, ticks: false, domain: false },
      },
      x2: { field: 'end' },
      y,
      description: { field: 'description' },
      color: {
        field: 'job',
        type: 'nominal',
        title: 'BatchJob',
        scale: { range: JOB_COLOURS },
        legend: { orient: 'top', direction: 'horizontal' },
      },
      fillOpacity: { condition: { test: IS_FAILED, value: 0.3 }, value: 1 },
      stroke: { condition: { test: IS_FAILED, value: FAILED }, value: null },
      strokeWidth: { condition: { test: IS_FAILED, value: 2 }, value: 0 },
      strokeDash: { condition: { test: "datum.outcome === 'cancelled'", value: [4, 3] }, value: [] },
    },
  });
  return {
    data: { name: DATA, values: rows },
    vconcat: nodes.map((node, index) => ({
      title: { text: node, anchor: 'start', fontSize: 12, fontWeight: 600, color: '#1d2129', offset: 4 },
      width,
      height: { step: 24 },
      transform: [{ filter: { field: 'node', equal: node } }],
      layer: [lanes, bars(index === nodes.length - 1)],
    })),
    spacing: 8,
    resolve: { scale: { x: 'shared', color: 'shared' } },
    config: {
      font: 'DejaVu Sans',
      view: { stroke: null },
      axis: { labelColor: '#667085', labelFontSize: 11, domain: false },
      axisX: { grid: true, gridColor: '#ffffff' },
      legend: { labelFontSize: 12, titleColor: '#667085', titleFontWeight: 400 },
    },
  };
}

/** The nodes of the lanes in `rows`, in the Testbed's order (node id, then name). */
function nodesOf(rows) {
  const lanes = rows.filter((row) => row.kind === 'slot').sort((a, b) => a.nodeId - b.nodeId || a.node.localeCompare(b.node));
  return [...new Set(lanes.map((lane) => lane.node))];
}

const EMBED_OPTIONS = {
  renderer: 'svg',
  actions: false,
  ast: true, // vega-embed's expression interpreter: no eval, which the page's CSP forbids
  defaultStyle: false, // no inline <style>: the CSP forbids it too
  tooltip: { disableDefaultStyle: true },
};

/** The chart of one Testbed in `chart`; `empty` is shown instead while it has no runs. */
export class Gantt {
  #chart;
  #empty;
  #embedded = null; // {drawn, result}: what vegaEmbed drew, updated in place while `drawn` stays
  #drawing = Promise.resolve();

  /** Whether the chart shows a run still going (its bar grows: draw again now and then). */
  running = false;

  constructor(chart, empty) {
    this.#chart = chart;
    this.#empty = empty;
  }

  /** The Vega view, for a person at the console and for the browser test (`view.data('gantt')`). */
  get view() {
    return this.#embedded?.result.view ?? null;
  }

  /** Draw the runs of `jobs` on `testbed` (null: none chosen); calls are taken in order. */
  show(testbed, jobs) {
    this.#drawing = this.#drawing.then(() => this.#draw(testbed, jobs)).catch((error) => {
      this.#empty.hidden = false;
      this.#empty.textContent = `The chart could not be drawn: ${error.message}`;
    });
    return this.#drawing;
  }

  async #draw(testbed, jobs) {
    const rows = testbed ? ganttRows(testbed, jobs, Date.now()) : [];
    const bars = rows.filter((row) => row.kind === 'run');
    this.running = bars.some((bar) => bar.outcome === 'running');
    this.#empty.hidden = bars.length > 0;
    this.#empty.textContent = testbed ? `No runs on Testbed ${testbed.name} yet.` : 'Choose a Testbed.';
    this.#chart.hidden = bars.length === 0;
    const width = this.#chart.clientWidth - LABELS;
    if (!bars.length || width <= 0) return;
    const nodes = nodesOf(rows);
    const drawn = JSON.stringify([testbed.name, width, nodes]); // what the spec depends on beside the rows
    if (this.#embedded?.drawn !== drawn) {
      this.#embedded?.result.finalize();
      this.#embedded = null;
      const result = await window.vegaEmbed(this.#chart, spec(width, nodes, rows), EMBED_OPTIONS);
      this.#embedded = { drawn, result };
    } else {
      // resize: a node's rows may be more or fewer than before, and the SVG is sized to fit them
      await this.#embedded.result.view.data(DATA, rows).resize().runAsync();
    }
    this.#chart.dataset.testbed = testbed.name;
    this.#chart.dataset.bars = String(bars.length);
  }
}
