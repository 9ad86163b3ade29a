// End-to-end tests of the built page (../dist, from `trunk build --release`) in
// headless Chromium, in two modes: WebGPU on (SwiftShader) and WebGPU off (the
// page falls back to WebGL2 for drawing). Each mode loads a shared link, checks
// that the page starts without console errors, restores the link's settings,
// starts training with the space key, sees the loss fall, and keeps
// screenshots in web/artifacts/. Exits non-zero on the first failure.
//
// Each mode also checks the service worker (one cache, named for this build,
// holding the page's files), measures the spiral recipe (the page's default):
// training steps per second and frames per second while training, opens a
// classroom link and a side-by-side comparison from a link.
//
// The page reports its progress in the tab title
// ("Flow Playground | rings | GPU | step N | loss L (first F)"): with WebGPU the
// run must train on the GPU, without it on the CPU, in a Web Worker ("CPU
// worker"; `worker=off` keeps it on the page's thread, "CPU"). Each mode also
// checks that the worker and the page's thread give the same losses step for
// step (and so do three workers splitting each step, `workers=3`), and
// measures the spiral recipe and the lab both ways, the spiral recipe at the
// page's default pace and as fast as a worker trains it (spf=64), and split
// over two workers.

import { chromium } from 'playwright-core';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  countFrames, keepMouseMoving, longTasks, serve, watchLongTasks,
} from './page-tools.mjs';

const here = fileURLToPath(new URL('.', import.meta.url));
const dist = join(here, '..', 'dist');
const artifacts = join(here, 'artifacts');
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';

const common = [
  '--no-sandbox', '--disable-dev-shm-usage', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-quic',
];
const modes = {
  webgpu: {
    args: [...common, '--enable-unsafe-webgpu', '--enable-features=Vulkan',
      '--use-vulkan=swiftshader', '--use-angle=swiftshader'],
    device: 'GPU',
  },
  'no-webgpu': { args: [...common, '--use-angle=swiftshader'], device: 'CPU worker' },
};

/** The page's thread while a measurement trained: its long tasks. */
function pageThread(m) {
  return `page's thread: ${m.longTasks} tasks of 50 ms or more, ${m.longTaskMs.toFixed(0)} ms in all, the longest ${m.longestTask.toFixed(0)} ms`;
}

function progress(title) {
  const m = /step (\d+)(?: \| loss (-?[\d.]+) \(first (-?[\d.]+)\))?/.exec(title);
  return m ? { step: Number(m[1]), loss: Number(m[2]), first: Number(m[3]) } : null;
}

// Waits follow progress, not the clock: a slow or busy machine only makes them
// longer. A wait fails only when the page's title (which carries the step
// count) has not changed for this long. The figures printed below are
// measurements, never compared against a limit.
const STALL_SECONDS = Number(process.env.E2E_STALL_SECONDS ?? 600);

/** Resolves with `check()`'s first truthy value; fails only after
 *  STALL_SECONDS in which the page's title did not change. */
async function waitFor(page, what, check) {
  let last = null;
  let changedAt = Date.now();
  for (;;) {
    const value = await check();
    if (value) return value;
    const now = await page.title();
    if (now !== last) {
      last = now;
      changedAt = Date.now();
    } else if (Date.now() - changedAt > STALL_SECONDS * 1000) {
      throw new Error(`no progress for ${STALL_SECONDS} s waiting for ${what} (page: ${await page.title()})`);
    }
    await new Promise((ok) => setTimeout(ok, 250));
  }
}

async function runMode(name, { args, device }, base) {
  const browser = await chromium.launch({ executablePath: chromiumPath, args, headless: true });
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  // loading, clicks and screenshots may take long on a busy machine
  page.setDefaultTimeout(STALL_SECONDS * 1000);
  const errors = [];
  // errors, and WebGPU's validation messages (Chromium logs those as warnings)
  page.on('console', (m) => {
    const bad = m.type() === 'error' || (m.type() === 'warning' && /Invalid|While validating/.test(m.text()));
    if (bad) errors.push(m.text().slice(0, 500));
  });
  page.on('pageerror', (e) => errors.push(String(e)));
  const started = Date.now();
  // a shared link: a radial flow on the rings, with one setting the page must
  // ignore, asking for the GPU (Chromium's here is emulated: not chosen unasked)
  await page.goto(`${base}/?target=rings&flow=radial&family=cubic&stack=8&batch=256&spf=64&lr=0.01&colour=red&gpu=on`);
  await waitFor(page, 'the page to start', async () => (await page.title()).includes('step 0'));
  const firstPaint = Date.now() - started;
  // in a browser the GPU is found asynchronously; the run moves there before it starts
  const title = await waitFor(page, `the run on the ${device}`, async () => {
    const t = await page.title();
    return t.includes(`| ${device} |`) ? t : null;
  });
  if (!title.includes('rings')) throw new Error(`${name}: the link's target was not restored: ${title}`);
  await page.waitForTimeout(500);
  await page.screenshot({ path: join(artifacts, `${name}-opened.png`) });
  // focus the canvas (an empty part of the view), then play with the space key
  await page.mouse.click(1000, 600);
  await page.keyboard.press('Space');
  const playedAt = Date.now();
  const trained = await waitFor(page, 'training to progress', async () => {
    const p = progress(await page.title());
    return p && p.step >= 400 ? p : null;
  });
  await page.screenshot({ path: join(artifacts, `${name}-training.png`) });
  if (!(trained.loss < trained.first - 0.1)) {
    throw new Error(`${name}: the loss did not fall: ${await page.title()}`);
  }
  const seconds = (Date.now() - playedAt) / 1000;
  // the address follows the run on screen: its settings, without the ignored entry
  const address = page.url();
  if (!address.includes('target=rings') || !address.includes('flow=radial') || address.includes('colour=red')) {
    throw new Error(`${name}: the address does not follow the run: ${address}`);
  }
  const cache = await serviceWorkerCache(page);
  // the page's default run: on the CPU in both modes (Chromium's WebGPU here is
  // a software adapter, which the page sets aside), and with WebGPU on, the
  // same run asked onto the emulated GPU
  const spiral = await measureSpiral(page, base, name);
  if (spiral.device !== 'CPU worker') {
    throw new Error(`${name}: the spiral trained on the ${spiral.device}; a software adapter should leave it on the CPU, in a worker`);
  }
  // the default page trains at its pace, 4 steps a frame counted at 60
  // frames a second (at most 240 steps/s); at the slider's top (64) the
  // worker goes as fast as it can
  const spiralFast = await measureSpiral(page, base, name, '?spf=64', 'spiral-fast');
  if (spiralFast.device !== 'CPU worker') {
    throw new Error(`${name}: spf=64 trained the spiral on the ${spiralFast.device}, not in a worker`);
  }
  const spiralPage = await measureSpiral(page, base, name, '?worker=off', 'spiral-page-thread');
  if (spiralPage.device !== 'CPU') {
    throw new Error(`${name}: worker=off trained the spiral on the ${spiralPage.device}, not the page's thread`);
  }
  const spiralSplit = await measureSpiral(page, base, name, '?workers=2&spf=64', 'spiral-two-workers');
  if (spiralSplit.device !== 'CPU worker') {
    throw new Error(`${name}: workers=2 trained the spiral on the ${spiralSplit.device}, not in workers`);
  }
  const sameLosses = await workerMatchesThePage(page, base, name);
  const spiralGpu = device === 'GPU' ? await measureSpiral(page, base, name, '?gpu=on', 'spiral-gpu') : null;
  if (spiralGpu && spiralGpu.device !== 'GPU') {
    throw new Error(`${name}: gpu=on left the spiral on the ${spiralGpu.device}`);
  }
  const lab = await measureLab(page, base, name);
  const labPage = await measureLab(page, base, name, '&worker=off', 'CPU');
  const lesson = await openLesson(page, base, name);
  const compared = await sideBySide(page, base, name);
  const reloaded = await reloadKeepsTheRun(browser, base, name, errors);
  const phone = await onAPhone(browser, base, name, errors);
  if (errors.length) throw new Error(`${name}: console errors:\n${errors.join('\n')}`);
  await browser.close();
  console.log(`${name}: ok on the ${device} (first paint ${firstPaint} ms; step ${trained.step} in ${seconds.toFixed(1)} s, loss ${trained.first} -> ${trained.loss}; ${cache})`);
  console.log(`${name}: spiral recipe (${spiral.device}, the default pace of 4 steps a frame, at most 240 steps/s): ${spiral.stepsPerSecond.toFixed(1)} steps/s, ${spiral.fps.toFixed(1)} frames/s over ${spiral.seconds.toFixed(1)} s (paused, every frame drawn: ${spiral.pausedFps.toFixed(1)} frames/s; ${pageThread(spiral)})`);
  console.log(`${name}: spiral recipe with spf=64 (${spiralFast.device}, as fast as it trains): ${spiralFast.stepsPerSecond.toFixed(1)} steps/s, ${spiralFast.fps.toFixed(1)} frames/s over ${spiralFast.seconds.toFixed(1)} s (paused, every frame drawn: ${spiralFast.pausedFps.toFixed(1)} frames/s; ${pageThread(spiralFast)})`);
  console.log(`${name}: spiral recipe with worker=off (${spiralPage.device}): ${spiralPage.stepsPerSecond.toFixed(1)} steps/s, ${spiralPage.fps.toFixed(1)} frames/s over ${spiralPage.seconds.toFixed(1)} s (paused, every frame drawn: ${spiralPage.pausedFps.toFixed(1)} frames/s; ${pageThread(spiralPage)})`);
  console.log(`${name}: spiral recipe with workers=2 and spf=64 (a worker and a helper): ${spiralSplit.stepsPerSecond.toFixed(1)} steps/s, ${spiralSplit.fps.toFixed(1)} frames/s over ${spiralSplit.seconds.toFixed(1)} s (paused, every frame drawn: ${spiralSplit.pausedFps.toFixed(1)} frames/s; ${pageThread(spiralSplit)})`);
  console.log(`${name}: ${sameLosses}`);
  if (spiralGpu) {
    console.log(`${name}: spiral recipe with gpu=on (${spiralGpu.device}, emulated): ${spiralGpu.stepsPerSecond.toFixed(1)} steps/s, ${spiralGpu.fps.toFixed(1)} frames/s over ${spiralGpu.seconds.toFixed(1)} s`);
  }
  for (const l of [lab, labPage]) {
    console.log(`${name}: phi^4 lab (L=8, broken point, ${l.device}): ${l.stepsPerSecond.toFixed(1)} steps/s, ${l.fps.toFixed(1)} frames/s, ${l.msPerStep} ms a training step, ESS/N ${l.ess} at step ${l.step}; ${pageThread(l)}`);
  }
  console.log(`${name}: ${lesson}; ${compared}; ${reloaded}; ${phone}`);
}

/** Collects console errors (and touch interventions, whatever their level) of `page`. */
function watchConsole(page, errors, label) {
  page.on('console', (m) => {
    const text = m.text();
    const bad = m.type() === 'error' || /passive event listener|Intervention|Invalid|While validating/.test(text);
    if (bad) errors.push(`${label}: ${text.slice(0, 500)}`);
  });
  page.on('pageerror', (e) => errors.push(`${label}: ${e}`));
}

/** A run and the light theme from a link: the address keeps both, and a reload reopens them. */
async function reloadKeepsTheRun(browser, base, name, errors) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.setDefaultTimeout(STALL_SECONDS * 1000);
  watchConsole(page, errors, 'reload');
  const wanted = ['target=moons', 'flow=coupling', 'family=sinh', 'theme=light'];
  const follows = () => wanted.every((w) => page.url().includes(w));
  await page.goto(`${base}/?target=moons&flow=coupling&family=sinh&stack=4&lr=0.003&theme=light`);
  await waitFor(page, 'the moons page', async () => (await page.title()).includes('moons'));
  await waitFor(page, 'the address to follow the page', async () => follows());
  await page.reload();
  await waitFor(page, 'the reloaded page', async () => (await page.title()).includes('moons | '));
  await page.waitForTimeout(500);
  if (!follows()) throw new Error(`${name}: a reload lost the run or the theme: ${page.url()}`);
  await page.screenshot({ path: join(artifacts, `${name}-reloaded-light.png`) });
  await page.close();
  return 'a reload keeps the run and the light theme';
}

/** A phone: the narrow layout, taps and a swipe, without console errors. */
async function onAPhone(browser, base, name, errors) {
  const page = await browser.newPage({
    viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true,
  });
  page.setDefaultTimeout(STALL_SECONDS * 1000);
  watchConsole(page, errors, 'phone');
  await page.goto(`${base}/?target=rings&flow=radial&stack=8`);
  await waitFor(page, 'the page on a phone', async () => (await page.title()).includes('step 0'));
  await page.waitForTimeout(500);
  await page.screenshot({ path: join(artifacts, `${name}-phone.png`) });
  // open the controls' drawer, tap in the views, then swipe up through them
  await page.touchscreen.tap(60, 37);
  await page.waitForTimeout(300);
  await page.touchscreen.tap(195, 600);
  const cdp = await page.context().newCDPSession(page);
  const touch = (type, y) => cdp.send('Input.dispatchTouchEvent', {
    type, touchPoints: type === 'touchEnd' ? [] : [{ x: 195, y }],
  });
  await touch('touchStart', 700);
  for (let k = 1; k <= 10; k++) await touch('touchMove', 700 - 40 * k);
  await touch('touchEnd', 300);
  await page.waitForTimeout(500);
  await page.screenshot({ path: join(artifacts, `${name}-phone-touched.png`) });
  await page.close();
  return 'a phone (390 x 844, touch) works without console errors';
}

/** The same run stepped 25 times with the S key in a worker and on the
 *  page's thread: the title's mean losses (first and last 20 steps) agree. */
async function workerMatchesThePage(page, base, name) {
  const stepped = async (query) => {
    await page.goto(`${base}/?target=rings&flow=radial&family=cubic&stack=8&batch=256&lr=0.01&gpu=off${query}`);
    await waitFor(page, 'the rings page', async () => /\| step 0$/.test(await page.title()));
    await page.waitForTimeout(1000); // the GPU, if any, is found before the first step
    await page.mouse.click(1000, 600);
    for (let k = 1; k <= 25; k++) {
      await page.keyboard.press('s');
      await waitFor(page, `step ${k}`, async () => (progress(await page.title())?.step ?? 0) >= k);
    }
    const title = await page.title();
    if (progress(title).step !== 25) throw new Error(`${name}: 25 presses of S took the run to: ${title}`);
    return title;
  };
  const inWorker = await stepped('');
  const onPage = await stepped('&worker=off');
  const split = await stepped('&workers=3');
  if (!inWorker.includes('| CPU worker |') || !onPage.includes('| CPU |') || !split.includes('| CPU worker |')) {
    throw new Error(`${name}: expected a worker, the page's thread, then three workers: ${inWorker} / ${onPage} / ${split}`);
  }
  const losses = (t) => /\| loss .*$/.exec(t)?.[0];
  if (!losses(inWorker) || losses(inWorker) !== losses(onPage)) {
    throw new Error(`${name}: the worker's losses differ from the page's: ${inWorker} / ${onPage}`);
  }
  if (losses(split) !== losses(onPage)) {
    throw new Error(`${name}: three workers' losses differ from the page's: ${split} / ${onPage}`);
  }
  return `25 single steps in a worker, on the page's thread and split over three workers give the same losses (${losses(inWorker).slice(2)})`;
}

/** Opens the phi^4 lab from a link, trains ~10 s, and measures. */
async function measureLab(page, base, name, query = '', expected = 'CPU worker') {
  await page.goto(`${base}/?lab=phi4&L=8&m2=-4&lambda=2${query}`);
  await waitFor(page, 'the phi^4 lab', async () => (await page.title()).includes('phi^4 | step 0'));
  await page.mouse.click(1000, 600);
  await page.keyboard.press('Space');
  const labStep = async () => Number(/step (\d+)/.exec(await page.title())?.[1] ?? 0);
  await waitFor(page, 'the lab to train', async () => (await labStep()) > 0);
  const start = { step: await labStep(), at: Date.now() };
  await watchLongTasks(page);
  const frames = await countFrames(page, 10000);
  const title = await page.title();
  const end = { step: await labStep(), at: Date.now() };
  const long = await longTasks(page);
  await page.screenshot({ path: join(artifacts, `${name}-phi4-lab${query ? '-page-thread' : ''}.png`) });
  const ess = /ESS\/N ([\d.]+)/.exec(title)?.[1];
  const msPerStep = /([\d.]+) ms a step/.exec(title)?.[1];
  const labDevice = /\| (GPU|CPU worker|CPU)$/.exec(title)?.[1];
  if (!(end.step > start.step) || ess === undefined) {
    throw new Error(`${name}: the phi^4 lab did not train: ${title}`);
  }
  // Chromium's WebGPU here is SwiftShader, a software adapter: the lab keeps to
  // the CPU there (its lattice kernels took 7 s a step emulated, against 45 ms)
  if (labDevice !== expected) {
    throw new Error(`${name}: the phi^4 lab trained on the ${labDevice}, expected the ${expected}: ${title}`);
  }
  const seconds = (end.at - start.at) / 1000;
  return { stepsPerSecond: (end.step - start.step) / seconds, fps: frames.n / (frames.ms / 1000), ess, step: end.step, msPerStep, device: labDevice, ...long };
}

/** Opens a lesson from a classroom link: its run plays at once, on the rings, and the address keeps the lesson and the classroom mode. */
async function openLesson(page, base, name) {
  // a classroom link: the presenter's view, the curves and the top bar hidden
  await page.goto(`${base}/?lesson=radial-rings&present=on&hide=curves,pages`);
  const step = async () => Number(/step (\d+)/.exec(await page.title())?.[1] ?? 0);
  await waitFor(page, 'the lesson to train', async () => (await step()) > 0);
  await page.waitForTimeout(1000);
  await page.screenshot({ path: join(artifacts, `${name}-lesson.png`) });
  const title = await page.title();
  if (!title.includes('rings')) throw new Error(`${name}: the lesson's run is not on the rings: ${title}`);
  if (!page.url().includes('lesson=radial-rings')) {
    throw new Error(`${name}: the address lost the lesson: ${page.url()}`);
  }
  if (!page.url().includes('present=on&hide=curves,pages')) {
    throw new Error(`${name}: the address lost the classroom mode: ${page.url()}`);
  }
  return `a classroom link opens its lesson playing, presenting, curves and top bar hidden (step ${await step()})`;
}

/** A side-by-side link: three designs train together (the tab's title carries each run's steps). */
async function sideBySide(page, base, name) {
  await page.goto(`${base}/?compare=families&spf=8`);
  const steps = async () => (/steps ([\d/]+) of/.exec(await page.title())?.[1] ?? '').split('/').map(Number);
  await waitFor(page, 'the three designs to train', async () => {
    const s = await steps();
    return s.length === 3 && s.every((k) => k >= 8);
  });
  await page.waitForTimeout(1000);
  await page.screenshot({ path: join(artifacts, `${name}-side-by-side.png`) });
  if (!page.url().includes('compare=families')) {
    throw new Error(`${name}: the address lost the comparison: ${page.url()}`);
  }
  return `a side-by-side link trains three designs together (steps ${(await steps()).join('/')})`;
}

/** The service worker is active with one cache, named for this build, that holds the wasm. */
async function serviceWorkerCache(page) {
  const caches = await page.evaluate(async () => {
    await navigator.serviceWorker.ready;
    const names = await caches.keys();
    const files = [];
    for (const name of names) {
      for (const request of await (await caches.open(name)).keys()) files.push(new URL(request.url).pathname);
    }
    return { names, files };
  });
  if (caches.names.length !== 1 || !/^flowplay-[0-9a-f]{16}$/.test(caches.names[0])) {
    throw new Error(`service worker caches: ${JSON.stringify(caches.names)}`);
  }
  if (!caches.files.some((f) => f.endsWith('.wasm'))) {
    throw new Error(`the service worker did not cache the wasm: ${caches.files.join(', ')}`);
  }
  return `service worker cache ${caches.names[0]}, ${caches.files.length} files`;
}

/** Opens the default page (the spiral recipe), trains ~10 s, and measures. */
async function measureSpiral(page, base, name, query = '', label = 'spiral') {
  await page.goto(`${base}/${query}`);
  await waitFor(page, 'the spiral page', async () => (await page.title()).includes('spiral'));
  await page.waitForTimeout(1000); // the GPU, if any, is adopted before play
  // the mouse moving in both counts: a paused page draws a frame only on
  // input, and its idle animation frames would say nothing of drawing
  let stopMouse = keepMouseMoving(page);
  const paused = await countFrames(page, 3000);
  await stopMouse();
  await page.mouse.click(1000, 600);
  await page.keyboard.press('Space');
  await waitFor(page, 'the spiral to train', async () => (progress(await page.title())?.step ?? 0) > 0);
  const start = { step: progress(await page.title()).step, at: Date.now() };
  await watchLongTasks(page);
  stopMouse = keepMouseMoving(page);
  const frames = await countFrames(page, 10000);
  await stopMouse();
  const end = { step: progress(await page.title()).step, at: Date.now() };
  const long = await longTasks(page);
  const device = /\| (GPU|CPU worker|CPU) \|/.exec(await page.title())?.[1];
  await page.screenshot({ path: join(artifacts, `${name}-${label}.png`) });
  const seconds = (end.at - start.at) / 1000;
  return {
    stepsPerSecond: (end.step - start.step) / seconds, fps: frames.n / (frames.ms / 1000), seconds, device,
    pausedFps: paused.n / (paused.ms / 1000), ...long,
  };
}

const server = await serve(dist);
const base = `http://127.0.0.1:${server.address().port}`;
await mkdir(artifacts, { recursive: true });
let failed = false;
for (const [name, mode] of Object.entries(modes)) {
  try {
    await runMode(name, mode, base);
  } catch (e) {
    failed = true;
    console.error(`${name}: FAILED: ${e.message}`);
  }
}
server.close();
process.exit(failed ? 1 : 0);
