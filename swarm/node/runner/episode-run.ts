/**
 * One run of an attached script on one task, start to record: begin an episode per role, run the script's
 * process in its own work directory within its limits, judge the result, then end every episode with its
 * reward — or abort them all with the reason — and record the run. What it means for scheduling (retry, breaker,
 * wait for a busy server) is the verdict's, decided by the scheduler.
 */
import { randomBytes } from 'node:crypto';
import type { RunAbort } from '../../common/runner-api.ts';
import type { Logger } from '../log.ts';
import type { StoredClientRun } from '../store/client-runs.ts';
import type { AttachedClient } from './attached-client.ts';
import type { EpisodeApi } from './episode-api.ts';
import { inWorkDir, scriptEnv, type RoleEpisode } from './environment.ts';
import { EpisodeApiError } from './errors.ts';
import { runProcess, type ProcessResult, type ProcessSpec } from './process.ts';
import { hostSandbox, resolveLimits, type Sandbox } from './sandbox.ts';
import { parseResultLine, processFailure, rewardFromModule, rewardsPerRole, type Outcome } from './result.ts';
import { launchCommand, nodeRuntimeEnv, probeAgentV8Flags } from './script.ts';
import type { EpisodeSpec } from './tasks.ts';

/** The error the swarm's relay answers for an episode whose server peer is gone (p2p/errors.ts peerGone). */
const SERVER_GONE_ERROR = 'PeerGoneError';
/** The episode API takes abort reasons up to this long (swarm-api's abortEpisodeRequestSchema). */
const ABORT_REASON_CHARS = 2000;

export type RunVerdict =
  /** Every episode ended with its reward (a team's: the mean). */
  | { kind: 'ended'; reward: number }
  /** The server would not start an episode now (busy, unreachable): no run happened; try again after the wait. */
  | { kind: 'refused'; retryAfterMs: number | null; reason: string }
  /** The script's own failure: retried while attempts remain, counted by the circuit breaker. */
  | { kind: 'failed'; abort: RunAbort }
  /** Aborted for another reason (replaced, detached, stopping, result refused): counted, not retried. */
  | { kind: 'aborted'; abort: RunAbort };

export interface EpisodeRunContext {
  api: EpisodeApi;
  /** The peer's data directory: off limits to scripts. */
  dataDir: string;
  /** Parent of the per-run work directories. */
  workRoot: string;
  /** How `sandbox: true` scripts are isolated (default: this machine's, see sandbox.ts). */
  sandbox?: Sandbox;
  /** Runs the script's process (default: runProcess, in this process; the runner's goes through its launcher). */
  launch?: (spec: ProcessSpec) => Promise<ProcessResult>;
  log?: Logger;
  record(run: StoredClientRun): void;
}

/** An outside abort (hot swap, detach, stop) passes its RunAbort as the AbortSignal's reason. */
export function isRunAbort(value: unknown): value is RunAbort {
  return typeof value === 'object' && value !== null && typeof (value as RunAbort).code === 'string' && typeof (value as RunAbort).reason === 'string';
}

export async function runEpisode(
  ctx: EpisodeRunContext,
  client: AttachedClient,
  spec: EpisodeSpec,
  signal: AbortSignal,
  onStarted: () => void,
): Promise<RunVerdict> {
  // The version that runs: a hot swap while this run is in flight changes the client, not this run.
  const { script, options, rewardFn, isTeam: team } = client;
  const roles = Object.entries(client.models);
  const startedAt = new Date().toISOString();
  const episodes: RoleEpisode[] = [];
  const record = (outcome: { status: 'ended'; reward: number } | { status: 'aborted'; abort: RunAbort }, proc?: ProcessResult) =>
    ctx.record({
      episodeIds: episodes.map((e) => e.episode.episodeId),
      client: client.name,
      scriptHash: script.hash,
      taskId: spec.taskId,
      kind: spec.kind,
      status: outcome.status,
      code: outcome.status === 'aborted' ? outcome.abort.code : null,
      reason: outcome.status === 'aborted' ? outcome.abort.reason : null,
      reward: outcome.status === 'ended' ? outcome.reward : null,
      exitCode: proc?.exitCode ?? null,
      processMs: proc?.durationMs ?? null,
      stdout: proc?.stdout ?? '',
      stderr: proc?.stderr ?? '',
      startedAt,
      endedAt: new Date().toISOString(),
    });
  /** Aborts the members; true when one of them had lost its server (the episode API says its peer is gone). */
  const abortAll = async (members: RoleEpisode[], reason: string): Promise<boolean> => {
    const results = await Promise.allSettled(members.map((m) => ctx.api.abort(client.name, m.episode.episodeId, reason.slice(0, ABORT_REASON_CHARS))));
    let serverGone = false;
    for (const r of results) {
      if (r.status === 'fulfilled') continue;
      if (r.reason instanceof EpisodeApiError && r.reason.errorName === SERVER_GONE_ERROR) serverGone = true;
      else ctx.log?.warn('abort refused', { client: client.name, error: String(r.reason) });
    }
    return serverGone;
  };

  // 1. One episode per role; a team's share a team id.
  const teamId = team ? `team-${randomBytes(8).toString('hex')}` : undefined;
  try {
    for (const [role, model] of roles) {
      const episode = await ctx.api.begin({
        model,
        taskId: spec.taskId,
        kind: spec.kind,
        client: client.name,
        scriptHash: script.hash,
        ...(teamId ? { teamId } : {}),
        ...(options.idleTimeoutS ? { idleTimeoutS: options.idleTimeoutS } : {}),
        ...(options.sampling && spec.kind === 'eval' ? { sampling: options.sampling } : {}),
        ...(options.aliases.length > 0 ? { aliases: options.aliases } : {}),
      });
      episodes.push({ role, episode });
      if (spec.kind === 'train') client.serverAt(episode.step, episode.evalEvery);
    }
  } catch (err) {
    const reason = `could not start the episode: ${(err as Error).message}`;
    // A team member that did start must not linger until its idle timeout.
    await abortAll(episodes, reason);
    // Busy or unreachable is not the script's fault and not a run: wait as the server asks, then the same task.
    if (err instanceof EpisodeApiError && err.retryable) return { kind: 'refused', retryAfterMs: err.retryAfterMs, reason };
    const abort: RunAbort = { code: 'begin_failed', reason };
    record({ status: 'aborted', abort });
    return { kind: 'failed', abort };
  }
  onStarted();

  // 2. The script, in its own directory with only what it needs.
  if (script.runtime === 'node') await probeAgentV8Flags();
  const proc = await inWorkDir(ctx.workRoot, (workDir) => {
    const env = { ...scriptEnv(workDir, spec, episodes, team), ...(script.runtime === 'node' ? nodeRuntimeEnv() : {}) };
    // sandbox: false runs the script as it is: no namespace, no guards, no limits (the client trusts it).
    const launch = options.sandbox
      ? (ctx.sandbox ?? hostSandbox()).prepare({ script, workDir, dataDir: ctx.dataDir, limits: resolveLimits(options.limits, options.timeLimitS), network: options.network ?? 'on' })
      : { ...launchCommand(script, { workDir, sandbox: false, dataDir: ctx.dataDir }), settle: (r: ProcessResult) => r, release() {} };
    const { command, args } = launch;
    return (ctx.launch ?? runProcess)({ command, args, cwd: workDir, env, timeLimitMs: options.timeLimitS * 1000, outputIdleMs: options.outputIdleS * 1000, signal })
      .then((result) => launch.settle(result))
      .finally(() => launch.release());
  });

  // 3. Judge it. Killed from outside (hot swap, detach, stop) is not the script's fault.
  if (proc.killedFor === 'aborted') {
    const abort: RunAbort = isRunAbort(signal.reason) ? signal.reason : { code: 'runner_stopped', reason: `aborted: ${proc.abortReason}` };
    await abortAll(episodes, abort.reason);
    record({ status: 'aborted', abort }, proc);
    return { kind: 'aborted', abort };
  }
  const failure = processFailure(proc, options);
  const outcome: Outcome = failure
    ? { ok: false, abort: failure }
    : rewardFn
      ? await rewardFromModule(rewardFn, spec.task, proc.lastLine, proc.stdout)
      : parseResultLine(proc.lastLine);
  const rewards = outcome.ok ? rewardsPerRole(outcome.result, roles.map(([r]) => r), team) : outcome;
  if (!outcome.ok || !rewards.ok) {
    const failed = !outcome.ok ? outcome.abort : (rewards as { ok: false; abort: RunAbort }).abort;
    // A script whose server went away mid-run failed because its calls did: that is the swarm's, not the script's.
    const serverGone = await abortAll(episodes, failed.reason);
    const abort: RunAbort = serverGone ? { code: 'server_gone', reason: `its episode's server went away during the run (${failed.reason})` } : failed;
    record({ status: 'aborted', abort }, proc);
    return serverGone ? { kind: 'aborted', abort } : { kind: 'failed', abort };
  }

  // 4. Report: every member of a team ends, or (when one cannot) all the others abort with the reason.
  const result = outcome.result;
  const ended: RoleEpisode[] = [];
  try {
    for (const member of episodes) {
      await ctx.api.end(client.name, member.episode.episodeId, {
        reward: rewards.rewards[member.role],
        ...(result.success !== undefined ? { success: result.success } : {}),
        ...(result.metrics ? { metrics: result.metrics } : {}),
      });
      ended.push(member);
    }
  } catch (err) {
    const abort: RunAbort = { code: 'end_refused', reason: `the episode API refused the result: ${(err as Error).message}` };
    await abortAll(episodes.filter((e) => !ended.includes(e)), abort.reason);
    record({ status: 'aborted', abort }, proc);
    return { kind: 'aborted', abort };
  }
  const values = Object.values(rewards.rewards);
  const reward = values.reduce((a, b) => a + b, 0) / values.length;
  record({ status: 'ended', reward }, proc);
  return { kind: 'ended', reward };
}
