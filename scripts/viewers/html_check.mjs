// Opens a `vramledger report --html` page in headless Chromium at several widths and checks
// what a reader sees:
//   - no console or page error (the page has no script: none expected);
//   - it reflows: at every width the page itself never scrolls sideways (a wide table scrolls
//     inside its own box), and each timeline's box fits the window;
//   - no stage label of a timeline is clipped by its chart (each label's box lies inside the
//     SVG's) and no two labels overlap.
// Prints one line per check and `html: ok` or the failures; exit 0 only when all pass.
//
//   node html_check.mjs PAGE.html [--widths 1400,800,500] [--screenshot FILE] [--chromium PATH]
import path from 'node:path';
import {chromium} from 'playwright-core';
import {CHROMIUM_ARGS} from './serve.mjs';

function args(argv) {
  const out = {file: null, widths: [1400, 800, 500], screenshot: null,
               chromium: process.env.CHROMIUM || '/usr/bin/chromium'};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--widths') out.widths = argv[++i].split(',').map(Number);
    else if (a === '--screenshot') out.screenshot = argv[++i];
    else if (a === '--chromium') out.chromium = argv[++i];
    else if (!out.file) out.file = a;
    else throw new Error(`unexpected argument ${a}`);
  }
  if (!out.file) throw new Error('usage: html_check.mjs PAGE.html [--widths W,W]');
  return out;
}

async function main() {
  const opt = args(process.argv.slice(2));
  const browser = await chromium.launch({executablePath: opt.chromium, args: CHROMIUM_ARGS});
  const failures = [];
  const fail = msg => { failures.push(msg); console.log(`FAIL ${msg}`); };
  const pass = msg => console.log(`ok   ${msg}`);
  try {
    for (const width of opt.widths) {
      const page = await browser.newPage({viewport: {width, height: 1000}});
      const errors = [];
      page.on('console', m => { if (m.type() === 'error') errors.push(m.text()); });
      page.on('pageerror', e => errors.push(e.message));
      await page.goto(`file://${path.resolve(opt.file)}`);
      const r = await page.evaluate(() => {
        const doc = document.documentElement;
        const svgs = Array.from(document.querySelectorAll('svg.timeline'));
        const charts = svgs.map(svg => {
          const box = svg.getBoundingClientRect();
          const labels = Array.from(svg.querySelectorAll('text.stage')).map(t => {
            const b = t.getBoundingClientRect();
            return {text: t.textContent, left: b.left, right: b.right, top: b.top, bottom: b.bottom};
          });
          const clipped = labels.filter(l => l.left < box.left - 0.5 || l.right > box.right + 0.5);
          const overlaps = [];
          for (let i = 0; i < labels.length; i++) {
            for (let j = i + 1; j < labels.length; j++) {
              const a = labels[i], b = labels[j];
              if (a.left < b.right - 0.5 && b.left < a.right - 0.5 &&
                  a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5) overlaps.push(`${a.text}/${b.text}`);
            }
          }
          // The chart's own box (it may scroll inside it on a narrow window).
          const holder = (svg.closest('.chart') || svg).getBoundingClientRect();
          return {width: holder.width, labels: labels.length, clipped: clipped.map(l => l.text), overlaps};
        });
        return {scroll: doc.scrollWidth, client: doc.clientWidth, charts};
      });
      const where = `${width} px`;
      if (r.scroll <= r.client + 1) pass(`${where}: the page does not scroll sideways`);
      else fail(`${where}: the page is ${r.scroll} px wide in a ${r.client} px window`);
      if (!r.charts.length) fail(`${where}: no timeline`);
      r.charts.forEach((c, i) => {
        if (c.width > r.client + 1) fail(`${where}: timeline ${i} is ${c.width} px wide`);
        if (c.clipped.length) fail(`${where}: timeline ${i} clips ${c.clipped.join(', ')}`);
        if (c.overlaps.length) fail(`${where}: timeline ${i} overlapping labels ${c.overlaps.join(', ')}`);
      });
      const shown = r.charts.map(c => c.labels).reduce((a, b) => a + b, 0);
      pass(`${where}: ${r.charts.length} timelines, ${shown} stage labels checked`);
      if (errors.length) fail(`${where}: ${errors.join(' | ')}`);
      if (opt.screenshot && width === opt.widths[0]) {
        await page.screenshot({path: opt.screenshot, fullPage: true});
      }
      await page.close();
    }
  } finally {
    await browser.close();
  }
  console.log(failures.length ? `html: ${failures.length} failed` : 'html: ok');
  process.exit(failures.length ? 1 : 0);
}

main().catch(e => {
  console.log(`html: error: ${e.stack || e}`);
  process.exit(2);
});
