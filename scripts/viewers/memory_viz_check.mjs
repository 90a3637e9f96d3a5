// Opens a memory_viz pickle in PyTorch's own viewer (MemoryViz.js, served from its folder on
// loopback) in headless Chromium, and checks what a person would see:
//   - no console error and no page error, in any of the four views;
//   - "Active Memory Timeline" and "Active Cached Segment Timeline" draw their allocations,
//     none in the colour of the `unknown` category, and hovering each one shows a timestamp
//     that is a wall-clock date (not January 1970);
//   - "Allocator State History" lists the events, and clicking every row replays the trace
//     with no block drawn red ("freed but waiting due to record_stream");
//   - "Allocator Settings" shows the settings.
// Prints one line per check and `memory_viz: ok` or the failures; exit 0 only when all pass.
//
//   node memory_viz_check.mjs FILE.pickle --viewer DIR [--screenshots DIR] [--year YYYY]
//                                          [--chromium PATH] [--max-clicks N]
import fs from 'node:fs';
import path from 'node:path';
import {chromium} from 'playwright-core';
import {CHROMIUM_ARGS, serve} from './serve.mjs';

const VIEWS = [
  'Active Memory Timeline',
  'Allocator State History',
  'Active Cached Segment Timeline',
  'Allocator Settings',
];

function args(argv) {
  const out = {file: null, viewer: null, screenshots: null, year: null, max_clicks: 3000,
               chromium: process.env.CHROMIUM || '/usr/bin/chromium'};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => argv[++i];
    if (a === '--viewer') out.viewer = next();
    else if (a === '--screenshots') out.screenshots = next();
    else if (a === '--year') out.year = Number(next());
    else if (a === '--chromium') out.chromium = next();
    else if (a === '--max-clicks') out.max_clicks = Number(next());
    else if (!out.file) out.file = a;
    else throw new Error(`unexpected argument ${a}`);
  }
  if (!out.file || !out.viewer) {
    throw new Error('usage: memory_viz_check.mjs FILE.pickle --viewer DIR [--screenshots DIR]');
  }
  return out;
}

// The viewer's folder at /, the pickle at /snapshot.pickle, a page that loads it at /check.html.
function page(viewer) {
  return fs.readFileSync(path.join(viewer, 'index.html'), 'utf8').replace(
    /<script type="module" src="\.\/MemoryViz\.js"><\/script>/,
    `<script type="module">
import {add_remote_files} from './MemoryViz.js';
add_remote_files([{name: 'snapshot.pickle', url: '/snapshot.pickle'}]);
</script>`);
}

async function main() {
  const opt = args(process.argv.slice(2));
  const server = await serve(opt.viewer, {'/snapshot.pickle': path.resolve(opt.file)},
                             {'/check.html': page(opt.viewer)});
  const port = server.address().port;
  const browser = await chromium.launch({
    executablePath: opt.chromium,
    args: CHROMIUM_ARGS,
  });
  const failures = [];
  const fail = msg => {
    failures.push(msg);
    console.log(`FAIL ${msg}`);
  };
  const pass = msg => console.log(`ok   ${msg}`);
  try {
    const page = await browser.newPage({viewport: {width: 1400, height: 900}});
    const errors = [];
    page.on('console', m => {
      if (m.type() === 'error') errors.push(`console: ${m.text()} (${m.location().url})`);
    });
    page.on('pageerror', e => errors.push(`page error: ${e.message}`));
    await page.goto(`http://127.0.0.1:${port}/check.html`);
    // The device select gets its options once the snapshot is loaded.
    await page.waitForFunction(() => document.querySelectorAll('select')[2]?.options.length > 0,
                               null, {timeout: 20000});
    const devices = await page.evaluate(
      () => Array.from(document.querySelectorAll('select')[2].options).map(o => o.value));
    pass(`loaded; devices ${devices.join(', ')}`);
    if (errors.length) fail(`loading: ${errors.join(' | ')}`);
    else pass('loading: no console error');
    for (const device of devices) {
      for (const view of VIEWS) {
        const before = errors.length;
        await page.evaluate(([v, d]) => {
          const [, viewSel, gpuSel] = document.querySelectorAll('select');
          viewSel.value = v;
          gpuSel.value = d;
          gpuSel.dispatchEvent(new Event('change'));
        }, [view, device]);
        await page.waitForTimeout(300);
        const where = `device ${device}, ${view}`;
        if (view.endsWith('Timeline')) await checkTimeline(page, where, opt, pass, fail);
        if (view === 'Allocator State History') await checkHistory(page, where, opt, pass, fail);
        if (view === 'Allocator Settings') {
          const shown = await page.evaluate(() => {
            const d = Array.from(document.querySelectorAll('body > div'))
              .find(x => x.style.display !== 'none' && x.querySelector('pre'));
            return d ? d.innerText : '';
          });
          if (shown.includes('CUDA Caching Allocator Settings')) pass(`${where}: shown`);
          else fail(`${where}: settings not shown (${shown})`);
        }
        if (opt.screenshots) {
          fs.mkdirSync(opt.screenshots, {recursive: true});
          const name = `memory-viz-${view.toLowerCase().replace(/ /g, '-')}` +
            (devices.length > 1 ? `-device${device}` : '') + '.png';
          await page.screenshot({path: path.join(opt.screenshots, name)});
        }
        const fresh = errors.slice(before);
        if (fresh.length) fail(`${where}: ${fresh.join(' | ')}`);
        else pass(`${where}: no console error`);
      }
    }
  } finally {
    await browser.close();
    server.close();
  }
  console.log(failures.length ? `memory_viz: ${failures.length} failed` : 'memory_viz: ok');
  process.exit(failures.length ? 1 : 0);
}

// The shown view's polygons: each allocation drawn, none coloured as `unknown`, and each
// one's hover text with a wall-clock timestamp.
async function checkTimeline(page, where, opt, pass, fail) {
  const r = await page.evaluate(() => {
    const div = Array.from(document.querySelectorAll('body > div'))
      .find(x => x.style.display !== 'none' && x.querySelector('svg'));
    if (!div) return {missing: true};
    const legend = Array.from(div.querySelectorAll('rect')).filter(
      x => typeof x.__data__ === 'string');
    const unknown = legend.findIndex(x => x.__data__ === 'unknown');
    const polys = Array.from(div.querySelectorAll('polygon')).filter(
      p => p.__data__ && p.__data__.elem !== 'summarized' && p.__data__.elem !== undefined);
    const unknownDrawn = unknown < 0 ? 0 :
      polys.filter(p => p.__data__.color === unknown).length;
    const texts = [];
    const pre = div.querySelector('pre');
    for (const p of polys) {
      p.dispatchEvent(new MouseEvent('mouseover', {bubbles: true}));
      texts.push(pre ? pre.textContent : '');
    }
    return {polys: polys.length, unknownDrawn, texts,
            categories: legend.map(x => x.__data__)};
  });
  if (r.missing) {
    fail(`${where}: nothing drawn`);
    return;
  }
  if (r.polys > 0) pass(`${where}: ${r.polys} allocations drawn (${r.categories.join(', ')})`);
  else fail(`${where}: no allocation drawn`);
  if (r.unknownDrawn) fail(`${where}: ${r.unknownDrawn} allocations drawn as category unknown`);
  else pass(`${where}: none drawn as category unknown`);
  const years = r.texts.map(t => {
    const m = / timestamp \w{3} \w{3} \d{2} (\d{4})/.exec(t);
    return m ? Number(m[1]) : null;
  });
  const bad = years.filter(y => y === null || y < 2001 || (opt.year && y !== opt.year));
  if (bad.length) {
    fail(`${where}: ${bad.length} hover texts without a wall-clock timestamp, e.g. ` +
         JSON.stringify(r.texts[years.findIndex(y => bad.includes(y))]));
  } else if (years.length) {
    pass(`${where}: every hover shows a timestamp in ${[...new Set(years)].join(', ')}`);
  }
}

// Clicks every event row (up to --max-clicks) and counts red blocks after each replay.
async function checkHistory(page, where, opt, pass, fail) {
  const r = await page.evaluate(max => {
    const div = Array.from(document.querySelectorAll('body > div'))
      .find(x => x.style.display !== 'none' && x.querySelector('pre'));
    if (!div) return {missing: true};
    const rows = Array.from(div.querySelectorAll('div > pre')).filter(p => p.__data__);
    let red = 0;
    let firstRed = null;
    let clicked = 0;
    for (const row of rows.slice(0, max)) {
      row.dispatchEvent(new MouseEvent('mousedown', {bubbles: true}));
      clicked++;
      const blocks = Array.from(div.querySelectorAll('svg rect')).filter(
        x => x.getAttribute('fill') === 'red' && Number(x.getAttribute('width')) > 0 &&
             x.__data__ && x.__data__.free_requested);
      if (blocks.length) {
        red += blocks.length;
        if (firstRed === null) firstRed = row.textContent;
      }
    }
    const segments = div.querySelectorAll('svg rect').length;
    return {rows: rows.length, clicked, red, firstRed, segments};
  }, opt.max_clicks);
  if (r.missing) {
    fail(`${where}: no event list`);
    return;
  }
  if (r.rows > 0) pass(`${where}: ${r.rows} events, ${r.clicked} clicked and replayed`);
  else fail(`${where}: no events listed`);
  if (r.red) fail(`${where}: ${r.red} blocks drawn red (freed, waiting on record_stream), first after "${r.firstRed}"`);
  else pass(`${where}: no block drawn red`);
}

main().catch(e => {
  console.log(`memory_viz: error: ${e.stack || e}`);
  process.exit(2);
});
