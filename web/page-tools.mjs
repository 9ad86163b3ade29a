// What the end-to-end test (e2e.mjs) and the page-thread measurement
// (page-thread.mjs) share: a static server for a built page, the
// measurements taken in the page (animation frames, the page thread's long
// tasks and processor time), and a mouse kept moving so every frame is drawn.

import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { extname, join, normalize } from 'node:path';

const types = {
  '.html': 'text/html',
  '.js': 'text/javascript',
  '.wasm': 'application/wasm',
  '.json': 'application/json',
  '.png': 'image/png',
  '.css': 'text/css',
  '.svg': 'image/svg+xml',
  '.webmanifest': 'application/manifest+json',
};

/** A static server for the built page in `dist` on a free port. */
export async function serve(dist) {
  const server = createServer(async (req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname));
    const file = join(dist, path.endsWith('/') ? join(path, 'index.html') : path);
    try {
      const body = await readFile(file);
      res.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream' });
      res.end(body);
    } catch {
      res.writeHead(404);
      res.end('not found');
    }
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  return server;
}

/** Counts animation frames for `ms` milliseconds: `{ n, ms }`. */
export function countFrames(page, ms) {
  return page.evaluate((ms) => new Promise((done) => {
    let n = 0;
    const t0 = performance.now();
    const tick = () => {
      n += 1;
      if (performance.now() - t0 < ms) requestAnimationFrame(tick);
      else done({ n, ms: performance.now() - t0 });
    };
    requestAnimationFrame(tick);
  }), ms);
}

/** Processor time the page's thread has used so far, in milliseconds
 *  (Chromium's `ThreadTime` metric, through a DevTools session `cdp` with
 *  `Performance.enable` sent). Unlike a count of frames, it does not depend
 *  on how fast this machine's software renderer fills pixels. */
export async function pageThreadMs(cdp) {
  const { metrics } = await cdp.send('Performance.getMetrics');
  return 1000 * (metrics.find((m) => m.name === 'ThreadTime')?.value ?? NaN);
}

/** Moves the mouse to and fro over an empty strip of the page until
 *  `stop()` is called, so egui draws every frame even when nothing else
 *  changes (a paused page otherwise draws only on input). */
export function keepMouseMoving(page, y = 790) {
  let moving = true;
  const done = (async () => {
    for (let i = 0; moving; i++) {
      await page.mouse.move(400 + 300 * Math.abs(Math.sin(i / 10)), y);
      await page.waitForTimeout(8);
    }
  })();
  return async () => {
    moving = false;
    await done;
  };
}

/** Starts recording the page thread's tasks of 50 ms or more (a frame at
 *  60 frames/s has 17 ms; a long task holds back every frame behind it). */
export function watchLongTasks(page) {
  return page.evaluate(() => {
    window.longTasks = [];
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.longTasks.push(e.duration);
    }).observe({ type: 'longtask' });
  });
}

/** The long tasks since `watchLongTasks`: how many, their sum, the longest. */
export async function longTasks(page) {
  const long = await page.evaluate(() => window.longTasks);
  return {
    longTasks: long.length,
    longestTask: Math.max(0, ...long),
    longTaskMs: long.reduce((a, b) => a + b, 0),
  };
}
