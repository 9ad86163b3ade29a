// Measures what training does to the page in headless Chromium (no WebGPU,
// 1280 x 800): for each link given, the training steps per second, the
// frames per second while training and paused, the page thread's processor
// time per frame and per second in both, and its tasks of 50 ms or more while training (a
// frame at 60 frames/s has 17 ms; a long task holds back every frame behind
// it). Not a test: it prints figures, it asserts nothing.
//
// Both phases keep the mouse moving over an empty strip, so every frame is
// drawn. Here the frames are bound by SwiftShader filling pixels on the two
// cores the worker shares; the processor time per frame is what the page's
// own thread spends, which sets the frame rate where a GPU draws.
//
//   node web/page-thread.mjs '?spf=64' '?lab=phi4'
//   DIST=/tmp/dist-old node web/page-thread.mjs '?spf=64'   (another build)
//
// Each link is opened, left 1.5 s, measured paused for 5 s, played with the
// space key, left 2 s, then measured for 10 s.

import { chromium } from 'playwright-core';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  countFrames, keepMouseMoving, longTasks, pageThreadMs, serve, watchLongTasks,
} from './page-tools.mjs';

const here = fileURLToPath(new URL('.', import.meta.url));
const dist = process.env.DIST ?? join(here, '..', 'dist');
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';

/** Over `ms` milliseconds with the mouse moving: animation frames a
 *  second, and the page thread's processor milliseconds a frame. */
async function frames(page, cdp, ms) {
  const stop = keepMouseMoving(page);
  const cpu = await pageThreadMs(cdp);
  const counted = await countFrames(page, ms);
  const used = (await pageThreadMs(cdp)) - cpu;
  await stop();
  return { perSecond: counted.n / (counted.ms / 1000), cpuMs: used / counted.n };
}

/** The step count in the tab's title. */
async function step(page) {
  return Number(/step (\d+)/.exec(await page.title())?.[1] ?? 0);
}

async function measure(browser, base, query) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(`${base}/${query}`);
  for (let i = 0; i < 400 && !/step \d/.test(await page.title()); i++) await page.waitForTimeout(250);
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable');
  await page.waitForTimeout(1500);
  const paused = await frames(page, cdp, 5000);
  await page.mouse.click(1000, 600);
  await page.keyboard.press('Space');
  await page.waitForTimeout(2000);
  await watchLongTasks(page);
  const start = { step: await step(page), at: Date.now() };
  const training = await frames(page, cdp, 10000);
  const end = { step: await step(page), at: Date.now() };
  const long = await longTasks(page);
  const title = await page.title();
  await page.close();
  const stepsPerSecond = (end.step - start.step) / ((end.at - start.at) / 1000);
  console.log(`${query || '(the default page)'}: ${stepsPerSecond.toFixed(1)} steps/s, `
    + `${training.perSecond.toFixed(1)} frames/s (paused ${paused.perSecond.toFixed(1)}); `
    + `page's thread: ${training.cpuMs.toFixed(1)} ms of processor time a frame, `
    + `${(training.cpuMs * training.perSecond).toFixed(0)} ms a second (paused `
    + `${paused.cpuMs.toFixed(1)}, ${(paused.cpuMs * paused.perSecond).toFixed(0)}), `
    + `${long.longTasks} tasks of 50 ms or more, `
    + `${long.longTaskMs.toFixed(0)} ms in all, the longest ${long.longestTask.toFixed(0)} ms`);
  console.log(`  ${title}`);
}

const server = await serve(dist);
const base = `http://127.0.0.1:${server.address().port}`;
const browser = await chromium.launch({
  executablePath: chromiumPath,
  args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run', '--use-angle=swiftshader'],
  headless: true,
});
console.log(`the page in ${dist}`);
for (const query of process.argv.slice(2).length ? process.argv.slice(2) : ['']) {
  await measure(browser, base, query);
}
await browser.close();
server.close();
