/**
 * Studies end to end on real peers, with the built-in model and the calculator agent (child processes):
 * a study of 2 arms × 2 seeds runs to its decision, and its report's numbers are recomputed from the runs' stores;
 * a study whose peer process is killed (SIGKILL) mid-study completes after a restart, no run planned or trained
 * twice, with the decision an uninterrupted study reaches; a bad study file changes nothing.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import type { StudyDetail, StudySummary } from '../../common/research-api.ts';
import { mean } from '../../common/research/stats.ts';
import { PeerClient, PeerRequestError } from '../cli/peer-client.ts';
import { startPeerProcess, type PeerProcess } from '../cli/peer-process.ts';
import { PeerRuntime } from '../runtime.ts';
import { metricOf, readRunCurve } from './run-metrics.ts';
import { quickStudyText } from './testing/quick-study.ts';

/**
 * The criterion asks for a held-out success of at least 10, which even the widest interval of two shares
 * (mean + t(0.975, 1) · sd / √2 ≤ 6.9) cannot reach, so the decision (not-met) does not depend on how the runs'
 * sampling went — what the resume test compares.
 */
const studyText = (name: string) =>
  quickStudyText({
    name,
    question: 'Can a run of one step reach a held-out success of 10?',
    hypothesis: 'It cannot; success is a share.',
    decision: '{ kind: threshold, arm: zero, atLeast: 10 }',
  });

const dirs: string[] = [];
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function waitForEnd(api: PeerClient, id: string): Promise<StudyDetail> {
  let detail: StudyDetail | undefined;
  await vi.waitFor(
    async () => {
      detail = await api.get<StudyDetail>(`/studies/${id}`);
      expect(['done', 'failed', 'stopped']).toContain(detail.status);
    },
    { timeout: 600_000, interval: 1000 },
  );
  return detail!;
}

describe('a study on the built-in model', () => {
  it('runs 2 arms × 2 seeds to its decision, and its report holds the numbers its runs\' stores give', async () => {
    const dataDir = tempDir('agentjet-study-');
    const runtime = await PeerRuntime.start({ dataDir, port: 0, consoleLogLevel: 'silent' });
    const api = new PeerClient(runtime.urls.api, runtime.token);
    try {
      const created = await api.request<StudySummary>('POST', '/studies', { text: studyText('whole'), baseDir: dataDir });
      const detail = await waitForEnd(api, created.id);
      expect(detail.status).toBe('done');
      expect(detail.studyRuns.map((r) => `${r.arm}/${r.seed}/${r.status}`).sort()).toEqual(['default/1/done', 'default/2/done', 'zero/1/done', 'zero/2/done']);
      expect(detail.analysis?.decision?.outcome).toBe('not-met');

      // Recomputed from each run's own store: the metric of every run, and every arm's mean.
      for (const run of detail.studyRuns) {
        const curve = readRunCurve(run.dir);
        expect(curve.steps.length).toBe(1);
        expect(curve.finalEval?.episodes).toBe(4);
        expect(metricOf({ kind: 'final-eval-success', k: 3 }, curve)).toBe(run.metric);
      }
      for (const arm of detail.analysis!.arms) {
        const metrics = detail.studyRuns.filter((r) => r.arm === arm.arm).map((r) => readRunCurve(r.dir).finalEval!.successRate);
        expect(arm.mean).toBeCloseTo(mean(metrics), 12);
      }
      const report = readFileSync(join(dataDir, 'studies', created.id, 'report.md'), 'utf8');
      for (const arm of detail.analysis!.arms) expect(report).toContain(arm.mean!.toFixed(3));
      expect(report).toContain('NOT-MET');
      // The control API renders the same report, as Markdown and as a page (one step per run: no curve to plot).
      const served = (format: string) => fetch(`${runtime.urls.api}/studies/${created.id}/report.${format}`, { headers: { authorization: `Bearer ${runtime.token}` } }).then((r) => r.text());
      expect(await served('md')).toBe(report);
      expect(await served('html')).toMatch(/^<!doctype html>[\s\S]*NOT-MET/);
      const findings = (await api.get<{ findings: { studyId: string; decision: string }[] }>('/notebook')).findings;
      expect(findings).toEqual([expect.objectContaining({ studyId: created.id, decision: 'not-met' })]);
    } finally {
      await runtime.stop();
    }
  }, 900_000);

  it('survives a SIGKILL of its peer mid-study: restarted, it completes with no run planned or trained twice', async () => {
    const dataDir = tempDir('agentjet-study-kill-');
    const start = () => startPeerProcess(['node', '--data-dir', dataDir, '--port', '0']);
    let peer: PeerProcess = await start();
    let api = new PeerClient(peer.ready.apiUrl, peer.ready.token);
    try {
      const created = await api.request<StudySummary>('POST', '/studies', { text: studyText('killed'), baseDir: dataDir });
      // Killed once the first runs have made their step: mid-run, or mid-evaluation.
      await vi.waitFor(
        async () => {
          const detail = await api.get<StudyDetail>(`/studies/${created.id}`);
          expect(detail.studyRuns.some((r) => r.runStep >= 1 || r.status === 'done')).toBe(true);
        },
        { timeout: 600_000, interval: 500 },
      );
      peer.child.kill('SIGKILL');
      await new Promise((resolve) => peer.child.once('exit', resolve));
      peer = await start();
      api = new PeerClient(peer.ready.apiUrl, peer.ready.token);
      const detail = await waitForEnd(api, created.id);
      expect(detail.status).toBe('done');
      expect(detail.analysis?.decision?.outcome).toBe('not-met');
      // One row per arm and seed, and one training run in each run's store: nothing was started a second time.
      expect(detail.studyRuns.map((r) => `${r.arm}/${r.seed}`).sort()).toEqual(['default/1', 'default/2', 'zero/1', 'zero/2']);
      for (const run of detail.studyRuns) {
        const curve = readRunCurve(run.dir);
        expect(curve.runIds).toHaveLength(1);
        expect(curve.steps).toHaveLength(1);
      }
      expect(detail.events.some((e) => e.kind === 'resume')).toBe(true);
    } finally {
      await peer.stop();
    }
  }, 900_000);

  it('refuses a bad study with the key that is wrong, and stores nothing', async () => {
    const dataDir = tempDir('agentjet-study-bad-');
    const runtime = await PeerRuntime.start({ dataDir, port: 0, consoleLogLevel: 'silent' });
    const api = new PeerClient(runtime.urls.api, runtime.token);
    try {
      const bad = studyText('bad').replace('learningRate: 0', 'learningRate: -1');
      const error = await api.request('POST', '/studies', { text: bad, baseDir: dataDir }).catch((err: unknown) => err);
      expect(error).toBeInstanceOf(PeerRequestError);
      expect((error as PeerRequestError).errorName).toBe('StudyFileError');
      expect((error as PeerRequestError).message).toContain('stages.0.arms.0.training.train.learningRate');
      const file = join(dataDir, 'bad.study.yaml');
      writeFileSync(file, studyText('bad').replace('seeds: 2', 'seedz: 2'));
      const typo = await api.request('POST', '/studies', { text: readFileSync(file, 'utf8'), baseDir: dataDir }).catch((err: unknown) => err);
      expect((typo as PeerRequestError).errorName).toBe('StudyFileError');
      expect((await api.get<{ studies: unknown[] }>('/studies')).studies).toEqual([]);
    } finally {
      await runtime.stop();
    }
  });
});
