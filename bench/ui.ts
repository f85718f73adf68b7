/**
 * The desktop UI under load, in headless Chromium against a real peer runtime:
 *   list_scroll_fps            frames per second while the Episodes list (100,000 episodes, paged through the API)
 *                              scrolls continuously for a few seconds
 *   merge_view_first_paint_ms  from "Open" in the Timeline view to the first painted canvas frame of a 50-turn,
 *                              30,000-token episode (includes fetching and parsing its export)
 *   merge_view_zoom_ms         median time from a zoom key press to the painted frame
 *   runs_list_first_paint_ms   from navigating to #/runs until the first run row is painted (1,000 runs)
 *   compare_pan_fps            frames per second while 8 runs × 10,000 steps, overlaid on every panel of the
 *                              comparison, are zoomed and panned continuously (drag-zooms sliding across the steps)
 *
 *   npm run bench -- ui [--json] [--episodes N] [--tokens N] [--runs N] [--run-steps N] [--ui-root DIR]
 *
 * Fixture, not test: the episodes and runs are seeded straight through the store's write functions
 * (swarm/node/store/episodes.ts, training-runs.ts, train-steps.ts) in one transaction each, which is how 100,000
 * episodes are made in seconds; the UI only ever reads them over the control API. Needs the built UI (`npm run build:ui`) and Chromium at /usr/bin/chromium.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Database } from 'better-sqlite3';
import { chromium, type Page } from 'playwright-core';
import { toMergeCalls, type CallRecord } from '../swarm/common/timeline/call.ts';
import { mergeTimelines } from '../swarm/common/timeline/merge.ts';
import { PeerRuntime } from '../swarm/node/runtime.ts';
import { endEpisode, insertEpisode, updateEpisodeState } from '../swarm/node/store/episodes.ts';
import { insertRun, type TrainingRunRow } from '../swarm/node/store/training-runs.ts';
import { insertTrainStep } from '../swarm/node/store/train-steps.ts';
import { CHROMIUM_ARGS, CHROMIUM_PATH as CHROMIUM } from '../e2e/support/chromium.ts';
import { formatTable, type BenchContext } from './report.ts';

const TARGETS = { listScrollFps: 50, firstPaintMs: 500 };
/** How long the list scrolls, and how far per frame (a brisk flick: ~3,600 px/s at 60 Hz). */
const SCROLL_MS = 4_000;
const SCROLL_PX_PER_FRAME = 60;
const ZOOM_STEPS = 16;
const TURNS = 50;
/** Runs overlaid by the comparison measured: the most it shows (MAX_COMPARED_RUNS). */
const COMPARED_RUNS = 8;

function option(args: string[], name: string): string | undefined {
  const index = args.indexOf(name);
  return index === -1 ? undefined : args[index + 1];
}

/**
 * Episodes over a few models, tasks and scripts, a second apart, each given its outcome (trained, every 17th
 * aborted) without calls: the list view needs rows, not token arrays.
 */
export function seedEpisodes(db: Database, count: number): void {
  const start = Date.UTC(2026, 0, 1);
  db.transaction(() => {
    for (let i = 0; i < count; i++) {
      const id = `ep-${String(i).padStart(7, '0')}`;
      const { createdAt } = insertEpisode(db, {
        id,
        model: i % 3 === 0 ? 'qwen-small' : 'tiny',
        taskId: `task-${i % 500}`,
        kind: i % 10 === 0 ? 'eval' : 'train',
        policyVersion: Math.floor(i / 1000),
        client: `agent-${i % 4}`,
        scriptHash: `h${(i % 4).toString(16).padStart(15, '0')}`,
        createdAt: new Date(start + i * 1000).toISOString(),
      });
      updateEpisodeState(db, id, {
        state: (i + 1) % 17 === 0 ? 'aborted' : 'trained',
        reward: ((i + 1) % 5) / 4,
        endedAt: createdAt,
      });
    }
  })();
}

/** A 50-turn agent episode whose merged timeline holds `tokens` tokens: a long prompt, then generation + tool result per turn. */
export function seedLongEpisode(db: Database, tokens: number): string {
  const id = 'ep-long-merge-view';
  const perTurn = Math.floor((tokens * 0.9) / TURNS);
  const generated = Math.floor(perTurn * 0.45);
  const tool = perTurn - generated;
  let next = 0;
  const fresh = (n: number) => Array.from({ length: n }, () => 32 + (next++ % 200));
  let history = fresh(tokens - perTurn * TURNS);
  const calls: CallRecord[] = [];
  const time = new Date(Date.UTC(2026, 1, 1)).toISOString();
  for (let index = 0; index < TURNS; index++) {
    const generatedIds = fresh(generated);
    calls.push({
      callId: `call-${index}`,
      index,
      agentKey: 'agent',
      messages: [{ role: 'user', content: `turn ${index}` }],
      tools: null,
      promptIds: history,
      generatedIds,
      logprobs: generatedIds.map((_, i) => -((i * 13) % 40) / 5),
      assistantMessage: { role: 'assistant', content: `turn ${index} answer` },
      finishReason: 'stop',
      policyVersion: 1,
      timings: { startedAt: time, firstTokenAt: time, endedAt: time },
      splice: { assistantTurns: index, splicedTurns: index, driftPreventedTurns: 0, turns: [] },
    });
    history = [...history, ...generatedIds, ...(index < TURNS - 1 ? fresh(tool) : [])];
  }
  insertEpisode(db, {
    id,
    model: 'tiny',
    taskId: 'long-task',
    kind: 'train',
    policyVersion: 1,
    createdAt: new Date(Date.UTC(2027, 0, 1)).toISOString(),
  });
  endEpisode(db, id, { reward: 1, calls, merge: mergeTimelines(toMergeCalls(calls), 'merged') });
  return id;
}

/** Frames per second of an empty page in the same browser: what this machine allows right now (a busy CPU lowers it). */
async function baselineFps(page: Page): Promise<number> {
  await page.setContent('<p>baseline</p>');
  await page.evaluate('window.__name = (fn) => fn');
  return page.evaluate(
    (durationMs) =>
      new Promise<number>((resolve) => {
        let frames = 0;
        const start = performance.now();
        const tick = (now: number) => {
          frames++;
          if (now - start < durationMs) requestAnimationFrame(tick);
          else resolve((frames * 1000) / (now - start));
        };
        requestAnimationFrame(tick);
      }),
    2_000,
  );
}

async function measureListScroll(
  page: Page,
): Promise<{ fps: number; longFrames: number; rowsPassed: number }> {
  await page.getByRole('navigation', { name: 'Views' }).locator('[data-view="episodes"]').click();
  await page.getByTestId('episode-row').first().waitFor();
  return page.evaluate(
    ({ durationMs, pxPerFrame }) =>
      new Promise<{ fps: number; longFrames: number; rowsPassed: number }>((resolve) => {
        const scroller = document.querySelector<HTMLElement>('[data-testid="episode-scroll"]')!;
        let frames = 0;
        let longFrames = 0;
        const start = performance.now();
        let last = start;
        const tick = (now: number) => {
          frames++;
          if (now - last > 33) longFrames++;
          last = now;
          scroller.scrollTop += pxPerFrame;
          if (now - start < durationMs) requestAnimationFrame(tick);
          else
            resolve({
              fps: (frames * 1000) / (now - start),
              longFrames,
              rowsPassed: Math.round(scroller.scrollTop / 36),
            });
        };
        requestAnimationFrame(tick);
      }),
    { durationMs: SCROLL_MS, pxPerFrame: SCROLL_PX_PER_FRAME },
  );
}

/** Resolves with ms from now until the merge canvas has painted more than `after` frames. */
function paintAfter(page: Page, after: number, action: string): Promise<number> {
  return page.evaluate(
    ({ after, action }) =>
      new Promise<number>((resolve) => {
        const start = performance.now();
        const check = () => {
          const canvas = document.querySelector<HTMLCanvasElement>('[data-testid="merge-canvas"]');
          if (canvas && Number(canvas.dataset.paints ?? 0) > after) resolve(performance.now() - start);
          else requestAnimationFrame(check);
        };
        if (action === 'open')
          document
            .querySelector<HTMLButtonElement>('form[aria-label="Choose an episode"] button[type="submit"]')!
            .click();
        else
          document
            .querySelector('[data-testid="merge-canvas"]')!
            .dispatchEvent(new KeyboardEvent('keydown', { key: action, bubbles: true }));
        check();
      }),
    { after, action },
  );
}

async function paints(page: Page): Promise<number> {
  return page.evaluate(() =>
    Number(document.querySelector<HTMLCanvasElement>('[data-testid="merge-canvas"]')?.dataset.paints ?? 0),
  );
}

async function measureMergeView(page: Page, episodeId: string) {
  await page.getByRole('navigation', { name: 'Views' }).locator('[data-view="timeline"]').click();
  await page.getByLabel('Episode id').fill(episodeId);
  const firstPaintMs = await paintAfter(page, 0, 'open');
  const fetched = await page.evaluate(() => {
    const entry = performance
      .getEntriesByType('resource')
      .filter((e) => /\/merge|\/export/.test(e.name))
      .pop() as PerformanceResourceTiming | undefined;
    return { bytes: entry?.encodedBodySize ?? 0, ms: entry?.duration ?? 0 };
  });
  const exportBytes = fetched.bytes;
  const exportFetchMs = fetched.ms;
  const zoomMs: number[] = [];
  const drawMs: number[] = [];
  for (let i = 0; i < ZOOM_STEPS; i++) {
    zoomMs.push(await paintAfter(page, await paints(page), i < ZOOM_STEPS / 2 ? '+' : '-'));
    drawMs.push(
      await page.evaluate(() =>
        Number(document.querySelector<HTMLCanvasElement>('[data-testid="merge-canvas"]')!.dataset.drawMs),
      ),
    );
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  const lanes = await page.getByTestId('merge-lane').count();
  const calls = await page.getByTestId('merge-call').count();
  return {
    firstPaintMs,
    exportFetchMs,
    exportBytes,
    zoomMs: median(zoomMs),
    drawMs: median(drawMs),
    maxDrawMs: Math.max(...drawMs),
    lanes,
    calls,
  };
}

export const RUNS_TARGETS = { listFirstPaintMs: 300, comparePanFps: 50 };
/** How long the comparison is zoomed and panned. */
const PAN_MS = 4_000;
/** Each drag-zoom spans this share of the plot's width, and the next one starts this far to the right. */
const ZOOM_WIDTH_SHARE = 0.3;
const PAN_STEP_SHARE = 0.05;
/** Mouse moves per drag: enough for uPlot to draw its selection box along the way. */
const DRAG_MOVES = 6;

const CONFIG = {
  batchTasks: 8,
  groupSize: 8,
  excludeUniformGroups: true,
  checkpointEvery: 20,
  maxSteps: 0,
  maxPolicyLag: 1,
  advantageEpsilon: 1e-6,
  mergeMode: 'merged',
  seed: 1,
  evalEvery: 10,
  train: { loss: 'ppo', clipLow: 0.2, clipHigh: 0.28, klCoef: 0, entropyCoef: 0, normalization: 'group', microBatchTokens: 4096, learningRate: 1e-5, weightDecay: 0, maxGradNorm: 1, schedule: 'constant' },
  lora: null,
};

function run(seq: number, over: Partial<TrainingRunRow>): TrainingRunRow {
  const createdAt = new Date(Date.UTC(2026, 0, 1) + seq * 60_000).toISOString();
  return {
    id: `run-${String(seq).padStart(5, '0')}`,
    seq,
    name: `bench-${seq}`,
    model: `model-${seq % 4}`,
    status: 'finished',
    start: { kind: 'source', source: 'builtin:tiny' },
    config: CONFIG,
    configHash: `c${(seq % 16).toString(16)}`,
    seed: seq,
    stepOffset: 0,
    createdAt,
    endedAt: new Date(Date.parse(createdAt) + 45_000).toISOString(),
    warnings: [],
    ...over,
  };
}

/** One optimizer step's record, as the training loop stores it (sqlite-training-store.ts), with plausible noise. */
function stepMetrics(runIndex: number, step: number): Record<string, unknown> {
  const wobble = Math.sin(step / 37 + runIndex) * 0.05;
  const reward = Math.min(1, (step / 10_000) * (0.6 + runIndex * 0.05)) + wobble;
  const timeMs = 400 + ((step * 7 + runIndex * 13) % 200);
  return {
    groups: 8,
    episodes: 64,
    samples: 64,
    rewardMean: reward,
    rewardStd: 0.2 + wobble,
    successRate: Math.max(0, Math.min(1, reward)),
    naiveTokens: 9_000 + (step % 500),
    metrics: { loss: 0.5 / Math.sqrt(step) + wobble / 10, clipFraction: 0.05 + wobble / 5, kl: 0.001 * Math.log(step + 1), entropy: 2 - step / 10_000, gradNorm: 1 + Math.abs(wobble) * 10, tokens: 3_000, trainedTokens: 1_500, microBatches: 1, timeMs },
    checkpoint: null,
    discardedGroups: step % 3,
    discardedShare: (step % 3) / 10,
    responseTokensMean: 200 + (step % 50),
    policyLagMean: (step % 4) / 4,
    policyLagMax: 1,
    phases: { rolloutMs: 2_000 + (step % 300), drainMs: 100, updateMs: timeMs },
    rolloutTokensPerS: 800 + (step % 100),
  };
}

/**
 * `count` runs, newest = highest seq; the newest `compared` of them have `steps` steps each (the rest none: the
 * list reads only their summaries). Returns the ids of the runs with steps, for the comparison.
 */
export function seedRuns(db: Database, count: number, compared: number, steps: number): string[] {
  const ids: string[] = [];
  const start = Date.UTC(2026, 0, 1);
  db.transaction(() => {
    for (let seq = 1; seq <= count; seq++) {
      const withSteps = seq > count - compared;
      // A model of its own per compared run: model steps are unique per model, and each run starts at step 1.
      const row = run(seq, withSteps ? { model: `sweep-${seq}`, name: `sweep-lr-${seq}`, config: { ...CONFIG, train: { ...CONFIG.train, learningRate: 1e-5 * (1 + (seq % 8)) } } } : {});
      insertRun(db, row);
      if (!withSteps) continue;
      ids.push(row.id);
      const index = ids.length - 1;
      for (let step = 1; step <= steps; step++)
        insertTrainStep(db, { model: row.model, step, policyVersion: step + 1, createdAt: new Date(start + step * 1000).toISOString(), runId: row.id, metrics: stepMetrics(index, step) });
    }
  })();
  return ids;
}

/** Ms from setting the fragment to #/runs until a run row exists and a frame has been painted with it. */
export async function measureRunsListFirstPaint(page: Page): Promise<{ ms: number; rows: number }> {
  return page.evaluate(
    () =>
      new Promise<{ ms: number; rows: number }>((resolve) => {
        const start = performance.now();
        const check = () => {
          const rows = document.querySelectorAll('[data-testid="run-row"]').length;
          // The row is in the DOM at this frame; the next rAF runs after it was painted.
          if (rows > 0) requestAnimationFrame(() => resolve({ ms: performance.now() - start, rows }));
          else requestAnimationFrame(check);
        };
        window.location.hash = '#/runs';
        requestAnimationFrame(check);
      }),
  );
}

/** Frames per second while the first chart of the comparison is drag-zoomed over a window sliding across the steps. */
export async function measureComparePan(page: Page, ids: readonly string[], expectedSteps: number): Promise<{ fps: number; longFrames: number; panels: number; zooms: number }> {
  await page.evaluate((hash) => (window.location.hash = hash), `#/runs/compare/${ids.join(',')}`);
  // Every run's steps are in (the panel counts what it holds) and the charts have drawn.
  await page.waitForFunction(
    (expected) => document.querySelector('[data-testid="compare-charts"] .count')?.textContent?.replace(/\D/g, '') === String(expected),
    expectedSteps,
    { timeout: 120_000 },
  );
  const panels = await page.locator('[data-testid="compare-charts"] .u-over').count();
  const over = page.locator('[data-testid="compare-charts"] .u-over').first();
  await over.scrollIntoViewIfNeeded();
  const box = (await over.boundingBox())!;
  const measuring = page.evaluate(
    (durationMs) =>
      new Promise<{ fps: number; longFrames: number }>((resolve) => {
        let frames = 0;
        let longFrames = 0;
        const start = performance.now();
        let last = start;
        const tick = (now: number) => {
          frames++;
          if (now - last > 33) longFrames++;
          last = now;
          if (now - start < durationMs) requestAnimationFrame(tick);
          else resolve({ fps: (frames * 1000) / (now - start), longFrames });
        };
        requestAnimationFrame(tick);
      }),
    PAN_MS,
  );
  let zooms = 0;
  const until = Date.now() + PAN_MS;
  const y = box.y + box.height / 2;
  for (let from = 0; Date.now() < until; from = (from + PAN_STEP_SHARE) % (1 - ZOOM_WIDTH_SHARE)) {
    // Each zoom is taken from the full range, so reset first (double-click), then drag the next window.
    await page.mouse.dblclick(box.x + box.width / 2, y);
    await page.mouse.move(box.x + box.width * from, y);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * (from + ZOOM_WIDTH_SHARE), y, { steps: DRAG_MOVES });
    await page.mouse.up();
    zooms++;
  }
  const { fps, longFrames } = await measuring;
  return { fps, longFrames, panels, zooms };
}

export default async function uiBench(ctx: BenchContext): Promise<Record<string, unknown>> {
  const episodes = Number(option(ctx.args, '--episodes') ?? 100_000);
  const tokens = Number(option(ctx.args, '--tokens') ?? 30_000);
  const runs = Number(option(ctx.args, '--runs') ?? 1_000);
  const runSteps = Number(option(ctx.args, '--run-steps') ?? 10_000);
  const uiRoot = option(ctx.args, '--ui-root') ?? fileURLToPath(new URL('../renderer/dist', import.meta.url));
  if (!existsSync(join(uiRoot, 'index.html')))
    throw new Error(`no built UI in ${uiRoot}: run npm run build:ui first`);
  const dataDir = mkdtempSync(join(tmpdir(), 'agentjet-bench-ui-'));
  const runtime = await PeerRuntime.start({ dataDir, port: 0, uiRoot, consoleLogLevel: 'warn' });
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  try {
    let t = performance.now();
    seedEpisodes(runtime.db, episodes);
    const longId = seedLongEpisode(runtime.db, tokens);
    const comparedIds = seedRuns(runtime.db, runs, COMPARED_RUNS, runSteps);
    ctx.log(
      `seeded ${episodes} episodes + one ${TURNS}-turn ${tokens}-token episode + ${runs} runs (${COMPARED_RUNS} × ${runSteps} steps) in ${((performance.now() - t) / 1000).toFixed(1)} s`,
    );

    const page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
    // tsx compiles with keepNames: functions passed to page.evaluate call a `__name` helper the page lacks.
    await page.addInitScript('window.__name = (fn) => fn');
    const baseline = await baselineFps(page);
    await page.goto(runtime.urls.ui);
    await page.getByTestId('connection-state').and(page.locator('[data-phase="live"]')).waitFor();
    t = performance.now();
    const scroll = await measureListScroll(page);
    ctx.log(`list scrolled ${scroll.rowsPassed} rows in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    const merge = await measureMergeView(page, longId);
    const runsList = await measureRunsListFirstPaint(page);
    const pan = await measureComparePan(page, comparedIds, COMPARED_RUNS * runSteps);

    const result = {
      episodes,
      episode_tokens: tokens,
      episode_turns: TURNS,
      baseline_fps: Number(baseline.toFixed(1)),
      list_scroll_fps: Number(scroll.fps.toFixed(1)),
      list_long_frames: scroll.longFrames,
      list_rows_scrolled: scroll.rowsPassed,
      merge_view_first_paint_ms: Number(merge.firstPaintMs.toFixed(1)),
      merge_view_export_fetch_ms: Number(merge.exportFetchMs.toFixed(1)),
      merge_view_export_bytes: merge.exportBytes,
      merge_view_zoom_ms: Number(merge.zoomMs.toFixed(1)),
      merge_view_draw_ms: merge.drawMs,
      merge_view_max_draw_ms: merge.maxDrawMs,
      merge_view_lanes: merge.lanes,
      merge_view_calls: merge.calls,
      runs,
      runs_list_first_paint_ms: Number(runsList.ms.toFixed(1)),
      runs_list_rows_painted: runsList.rows,
      compare_runs: COMPARED_RUNS,
      compare_steps_per_run: runSteps,
      compare_panels: pan.panels,
      compare_pan_fps: Number(pan.fps.toFixed(1)),
      compare_pan_long_frames: pan.longFrames,
      compare_pan_zooms: pan.zooms,
      targets: {
        list_scroll_fps: `>= ${TARGETS.listScrollFps}`,
        merge_view_first_paint_ms: `< ${TARGETS.firstPaintMs}`,
        runs_list_first_paint_ms: `< ${RUNS_TARGETS.listFirstPaintMs}`,
        compare_pan_fps: `>= ${RUNS_TARGETS.comparePanFps}`,
      },
      met: {
        list_scroll_fps: scroll.fps >= TARGETS.listScrollFps,
        merge_view_first_paint_ms: merge.firstPaintMs < TARGETS.firstPaintMs,
        runs_list_first_paint_ms: runsList.ms < RUNS_TARGETS.listFirstPaintMs,
        compare_pan_fps: pan.fps >= RUNS_TARGETS.comparePanFps,
      },
    };
    console.log(
      formatTable([
        {
          metric: 'baseline_fps',
          value: result.baseline_fps,
          target: '—',
          note: 'empty page, same browser: the ceiling on this machine now',
        },
        {
          metric: 'list_scroll_fps',
          value: result.list_scroll_fps,
          target: `>= ${TARGETS.listScrollFps}`,
          note: `${episodes} episodes, ${scroll.longFrames} frames > 33 ms, ${scroll.rowsPassed} rows passed`,
        },
        {
          metric: 'merge_view_first_paint_ms',
          value: result.merge_view_first_paint_ms,
          target: `< ${TARGETS.firstPaintMs}`,
          note: `export ${(merge.exportBytes / 1e6).toFixed(1)} MB fetched in ${merge.exportFetchMs.toFixed(0)} ms`,
        },
        {
          metric: 'merge_view_zoom_ms',
          value: result.merge_view_zoom_ms,
          target: '—',
          note: `key to painted frame; draw ${merge.drawMs} ms (max ${merge.maxDrawMs})`,
        },
        {
          metric: 'runs_list_first_paint_ms',
          value: result.runs_list_first_paint_ms,
          target: `< ${RUNS_TARGETS.listFirstPaintMs}`,
          note: `${runs} runs; #/runs to the first painted row (${runsList.rows} rows on screen)`,
        },
        {
          metric: 'compare_pan_fps',
          value: result.compare_pan_fps,
          target: `>= ${RUNS_TARGETS.comparePanFps}`,
          note: `${COMPARED_RUNS} runs × ${runSteps} steps on ${pan.panels} panels, ${pan.zooms} drag-zooms, ${pan.longFrames} frames > 33 ms`,
        },
      ]),
    );
    return result;
  } finally {
    await browser.close();
    await runtime.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
