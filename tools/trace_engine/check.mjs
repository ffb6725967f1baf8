// Loads a Chrome trace JSON with the DevTools Performance-panel trace engine
// (@paulirish/trace_engine) and prints what it understood: bounds, threads per
// process, flows. Exits non-zero on any exception or if the model is empty.
// Usage: node check.mjs TRACE.json
import fs from 'node:fs';
import * as Trace from '@paulirish/trace_engine';

globalThis.DOMRect ??= class DOMRect {
  constructor(x = 0, y = 0, width = 0, height = 0) { Object.assign(this, {x, y, width, height}); }
};

const path = process.argv[2];
if (!path) throw new Error('usage: node check.mjs TRACE.json');
const json = JSON.parse(fs.readFileSync(path, 'utf8'));
const events = Array.isArray(json) ? json : json.traceEvents;
if (!Array.isArray(events) || events.length === 0) throw new Error(`${path}: no trace events`);

const model = Trace.TraceModel.Model.createWithAllHandlers();
await model.parse(events);
const data = model.parsedTrace()?.data;
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
if (entries === 0 || bounds.range <= 0) throw new Error(`${path}: the model is empty`);
