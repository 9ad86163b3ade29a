// Measures what training does to the page in headless Chromium (no WebGPU,
// 1280 x 800): for each link given, the training steps per second, the
// frames per second while training and paused, and the page thread's tasks
// of 50 ms or more (a frame at 60 frames/s has 17 ms; a long task holds back
// every frame behind it). Not a test: it prints figures, it asserts nothing.
//
//   node web/page-thread.mjs '?spf=64' '?lab=phi4'
//   DIST=/tmp/dist-old node web/page-thread.mjs '?spf=64'   (another build)
//
// Each link is opened, left 1.5 s, measured paused for 3 s, played with the
// space key, left 2 s, then measured for 10 s.

import { chromium } from 'playwright-core';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { countFrames, longTasks, serve, watchLongTasks } from './page-tools.mjs';

const here = fileURLToPath(new URL('.', import.meta.url));
const dist = process.env.DIST ?? join(here, '..', 'dist');
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';

/** Animation frames a second over `ms` milliseconds. */
async function framesPerSecond(page, ms) {
  const frames = await countFrames(page, ms);
  return frames.n / (frames.ms / 1000);
}

/** The step count in the tab's title. */
async function step(page) {
  return Number(/step (\d+)/.exec(await page.title())?.[1] ?? 0);
}

async function measure(browser, base, query) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(`${base}/${query}`);
  for (let i = 0; i < 400 && !/step \d/.test(await page.title()); i++) await page.waitForTimeout(250);
  await page.waitForTimeout(1500);
  const paused = await framesPerSecond(page, 3000);
  await page.mouse.click(1000, 600);
  await page.keyboard.press('Space');
  await page.waitForTimeout(2000);
  await watchLongTasks(page);
  const start = { step: await step(page), at: Date.now() };
  const fps = await framesPerSecond(page, 10000);
  const end = { step: await step(page), at: Date.now() };
  const long = await longTasks(page);
  const title = await page.title();
  await page.close();
  const stepsPerSecond = (end.step - start.step) / ((end.at - start.at) / 1000);
  console.log(`${query || '(the default page)'}: ${stepsPerSecond.toFixed(1)} steps/s, `
    + `${fps.toFixed(1)} frames/s (paused ${paused.toFixed(1)}); page's thread: ${long.longTasks} `
    + `tasks of 50 ms or more, ${long.longTaskMs.toFixed(0)} ms in all, the longest `
    + `${long.longestTask.toFixed(0)} ms`);
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
