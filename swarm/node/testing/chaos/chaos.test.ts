/**
 * The chaos sections of `npm run bench -- chaos`, bounded for the suite: a full disk under a running peer (where a
 * tmpfs can be mounted), refused starts under back-pressure, and — in the long variant (AGENTJET_FUZZ_LONG=1) —
 * SIGKILLs at random points of the train loop with the invariant checked after each restart, and a swarm's server
 * killed and started again under a working client.
 */
import { describe, expect, it } from 'vitest';
import { runBackPressureChaos } from './back-pressure.ts';
import { runDiskFullChaos } from './disk-full.ts';
import { runServerRestartChaos } from './server-restart.ts';
import { runSigkillChaos } from './sigkill.ts';

const LONG = process.env.AGENTJET_FUZZ_LONG === '1';

describe('chaos', () => {
  it('a full disk: no crash, writes answered 507, reads served, writes again once space is freed', async (ctx) => {
    const figures = await runDiskFullChaos();
    if (figures.disk_full_skipped) ctx.skip(figures.disk_full_skipped);
    expect(figures).toMatchObject({ disk_full_crash: false, disk_full_other_5xx: 0, disk_full_reads_ok: true, disk_full_recovered: true });
    expect(figures.disk_full_507).toBe(figures.disk_full_writes);
  });

  it('a busy server sees one refused start per Retry-After from a client, and no refusal becomes a run or a failure', async () => {
    const figures = await runBackPressureChaos();
    expect(figures.refused_starts).toBeGreaterThan(0);
    expect(figures).toMatchObject({ refused_starts_per_s_max: 1, refused_run_rows: 0, refused_breaker_trips: 0 });
  });

  it.runIf(LONG)('SIGKILL at random points of the train loop never loses, double-trains or rewinds', { timeout: 600_000 }, async () => {
    const figures = await runSigkillChaos({ seed: Number(process.env.AGENTJET_FUZZ_SEED ?? 20261201), kills: 10 });
    expect(figures.sigkills).toBe(10);
    expect(figures.acked_ends).toBeGreaterThan(0);
    expect(figures).toMatchObject({ acked_lost: 0, acked_untrained_unmarked: 0, double_trained: 0, version_regressions: 0 });
  });

  it.runIf(LONG)("a swarm's server killed and started again: its client resumes by itself, its breaker shut", { timeout: 300_000 }, async () => {
    expect(await runServerRestartChaos()).toMatchObject({ client_resumed_after_server_restart: true, client_breaker_tripped: false });
  });
});
