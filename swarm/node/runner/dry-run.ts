/**
 * `attach --dry-run`: one episode of the first train task, run as an attached script's would be (same episode
 * API, sandbox and judging) but outside the scheduler, the run log and the stored attachments, answered with the
 * run and the episode's calls so a new script can be seen working (or failing) before it is attached.
 */
import type { AttachClientOptions, ClientRunRecord, DryRunCall, DryRunResult } from '../../common/runner-api.ts';
import type { StoredClientRun } from '../store/client-runs.ts';
import { AttachedClient } from './attached-client.ts';
import { EpisodeApiError, TaskSourceError } from './errors.ts';
import { runEpisode, type EpisodeRunContext } from './episode-run.ts';
import type { RewardFunction } from './result.ts';
import type { ScriptVersion } from './script.ts';
import { isHeldOut, type EpisodeSpec, type TaskPass } from './tasks.ts';

export interface DryRunVersion {
  options: AttachClientOptions;
  script: ScriptVersion;
  rewardFn: RewardFunction | undefined;
  pass: TaskPass;
}

export async function runDryRun(
  context: EpisodeRunContext,
  { options, script, rewardFn, pass }: DryRunVersion,
  signal: AbortSignal,
  readCalls?: (episodeId: string) => DryRunCall[],
): Promise<DryRunResult> {
  const task = await firstTrainTask(pass);
  // Begun as an eval episode: what a try-out produces must not join a GRPO group and be trained on.
  const spec: EpisodeSpec = { task, taskId: String(task.id), kind: 'eval' };
  const client = new AttachedClient(options.name);
  client.install({ version: 0, script, options, rewardFn, specs: noSpecs() });
  let recorded: StoredClientRun | undefined;
  const verdict = await runEpisode({ ...context, record: (run) => (recorded = run) }, client, spec, signal, () => {});
  if (verdict.kind === 'refused' || !recorded) {
    throw new EpisodeApiError(`the dry run could not start an episode: ${verdict.kind === 'refused' ? verdict.reason : 'no run was recorded'}`, 503, 'NoServerNowError');
  }
  const run: ClientRunRecord = recorded;
  const calls = readCalls ? run.episodeIds.flatMap((id) => readCalls(id)) : [];
  return { dryRun: true, run, calls };
}

async function firstTrainTask(pass: TaskPass) {
  for await (const task of pass()) if (!isHeldOut(task)) return task;
  throw new TaskSourceError('the task source has no train task to dry-run (every task is held out)');
}

async function* noSpecs(): AsyncGenerator<EpisodeSpec> {}
