import { chromium } from 'playwright-core';
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { extname, join, normalize } from 'node:path';
const dist = '/work/main/dist';
const types = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm', '.svg': 'image/svg+xml' };
const server = createServer(async (req, res) => {
  const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname));
  const file = join(dist, path.endsWith('/') ? join(path, 'index.html') : path);
  try { const body = await readFile(file); res.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream' }); res.end(body); }
  catch { res.writeHead(404); res.end('not found'); }
});
await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
const base = `http://127.0.0.1:${server.address().port}`;
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-dev-shm-usage', '--use-angle=swiftshader'], headless: true });
const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
page.on('console', (m) => console.log('console', m.type(), m.text().slice(0, 300)));
page.on('pageerror', (e) => console.log('pageerror', String(e)));
const query = process.argv[2] ?? '';
await page.goto(`${base}/${query}`);
for (let i = 0; i < 120; i++) { const t = await page.title(); if (/step 0/.test(t)) break; await page.waitForTimeout(500); }
console.log('title', await page.title());
await page.waitForTimeout(1000);
const fpsOf = (ms) => page.evaluate((ms) => new Promise((done) => { let n = 0; const t0 = performance.now(); const tick = () => { n += 1; if (performance.now() - t0 < ms) requestAnimationFrame(tick); else done(n / ((performance.now() - t0) / 1000)); }; requestAnimationFrame(tick); }), ms);
console.log('paused fps', (await fpsOf(5000)).toFixed(1));
await page.mouse.click(1000, 600);
await page.keyboard.press('Space');
await page.waitForTimeout(3000);
const step = async () => Number(/step (\d+)/.exec(await page.title())?.[1] ?? 0);
const s0 = await step(); const t0 = Date.now();
const frames = await page.evaluate(() => new Promise((done) => { let n = 0; const t0 = performance.now(); const tick = () => { n += 1; if (performance.now() - t0 < 8000) requestAnimationFrame(tick); else done({ n, ms: performance.now() - t0 }); }; requestAnimationFrame(tick); }));
const s1 = await step(); const t1 = Date.now();
console.log('title', await page.title());
console.log(`steps/s ${((s1 - s0) / ((t1 - t0) / 1000)).toFixed(1)} fps ${(frames.n / (frames.ms / 1000)).toFixed(1)}`);
await page.screenshot({ path: '/tmp/probe.png' });
await browser.close(); server.close();
