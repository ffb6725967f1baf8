// Loads a Chrome trace JSON with the DevTools Performance-panel trace engine
// (@paulirish/trace_engine) and prints what it understood: bounds, threads per
// process, flows, counter series. Exits non-zero on any exception, if the
// model is empty, or if something asked for is missing:
//   --flows     at least one flow (a send -> receive arrow) the engine linked
//   --counters  at least one counter series ("ph": "C", e.g. a rank's bytes in
//               use) on a process the engine named. The engine keeps counter
//               events but models only Chrome's own (UpdateCounters), so the
//               series are read from the events it kept after parsing.
// Usage: node check.mjs [--flows] [--counters] TRACE.json
import fs from 'node:fs';
import * as Trace from '@paulirish/trace_engine';

globalThis.DOMRect ??= class DOMRect {
  constructor(x = 0, y = 0, width = 0, height = 0) { Object.assign(this, {x, y, width, height}); }
};

const args = process.argv.slice(2);
const wantFlows = args.includes('--flows');
const wantCounters = args.includes('--counters');
const paths = args.filter(a => !a.startsWith('--'));
const unknown = args.filter(a => a.startsWith('--') && a !== '--flows' && a !== '--counters');
if (paths.length !== 1 || unknown.length > 0) {
  throw new Error('usage: node check.mjs [--flows] [--counters] TRACE.json');
}
const path = paths[0];
const json = JSON.parse(fs.readFileSync(path, 'utf8'));
const events = Array.isArray(json) ? json : json.traceEvents;
if (!Array.isArray(events) || events.length === 0) throw new Error(`${path}: no trace events`);

const model = Trace.TraceModel.Model.createWithAllHandlers();
await model.parse(events);
const parsed = model.parsedTrace();
const data = parsed?.data;
if (!data) throw new Error(`${path}: the engine produced no model`);

const bounds = data.Meta.traceBounds;
console.log(`${path}: ${events.length} events, bounds ${bounds.min}..${bounds.max} us (range ${bounds.range})`);
let entries = 0;
for (const [pid, proc] of data.Renderer.processes) {
  for (const [tid, thread] of proc.threads) {
    entries += thread.entries.length;
    const processName = data.Meta.processNames.get(pid)?.args?.name ?? '';
    console.log(`  pid ${pid} "${processName}" tid ${tid} "${thread.name ?? ''}": ${thread.entries.length} entries`);
  }
}
const flows = data.Flows.flows;
const first = flows[0] ? ` (first: ${flows[0].map(e => `"${e.name}" pid ${e.pid} tid ${e.tid}`).join(' -> ')})` : '';
console.log(`  flows: ${flows.length}${first}`);

// Counter series: (pid, name) pairs of the counter events the engine kept,
// on processes it named.
const series = new Map();
for (const e of parsed.traceEvents) {
  if (e.ph !== 'C' || !data.Meta.processNames.has(e.pid)) continue;
  const key = `pid ${e.pid} "${e.name}"`;
  series.set(key, (series.get(key) ?? 0) + 1);
}
const firstSeries = series.size > 0 ? ` (first: ${[...series][0][0]}, ${[...series][0][1]} samples)` : '';
console.log(`  counter series: ${series.size}${firstSeries}`);

if (entries === 0 || bounds.range <= 0) throw new Error(`${path}: the model is empty`);
if (wantFlows && flows.length === 0) throw new Error(`${path}: the engine found no flows`);
if (wantCounters && series.size === 0) {
  throw new Error(`${path}: no counter series on a process the engine named`);
}
