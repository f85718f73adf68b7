import type {
  AttachClientRequest,
  ClientRunRecord,
  ClientStatus,
  Task,
} from '../../../../swarm/common/runner-api.ts';
import type { AttachDraft, ClientsState, ThroughputSample } from './slice.ts';

/** Episodes finished per second over the recent samples (null until two samples span some time). */
function episodesPerSecond(samples: readonly ThroughputSample[] | undefined): number | null {
  if (!samples || samples.length < 2) return null;
  const first = samples[0];
  const last = samples[samples.length - 1];
  const seconds = (last.at - first.at) / 1000;
  return seconds > 0 ? (last.finished - first.finished) / seconds : null;
}

/**
 * Share of finished episodes that completed, i.e. ended with a result (the rest were aborted: crash, timeout, bad
 * output). Not "success": that is an episode's own flag, reported by its script or grader.
 */
function completionRate(client: ClientStatus): number | null {
  const finished = client.counts.ended + client.counts.aborted;
  return finished > 0 ? client.counts.ended / finished : null;
}

function selectedClient(clients: ClientsState): ClientStatus | null {
  return clients.list.find((c) => c.name === clients.selected) ?? null;
}

/**
 * What a change of a client's runs shows in its status: a run starting, ending, aborting or being retried moves a
 * count; a version or state change may end runs too. Equal keys mean its runs list is still current.
 */
function runsChangeKey(client: ClientStatus | null): string {
  if (!client) return '';
  const { started, ended, aborted, retried } = client.counts;
  return `${client.version}|${client.state}|${started}|${ended}|${aborted}|${retried}`;
}

/** Runs that failed, newest first, with why. */
function failures(runs: readonly ClientRunRecord[]): ClientRunRecord[] {
  return runs.filter((r) => r.status === 'aborted').reverse();
}

/** Whether dropping under this name replaces an attached script (hot swap) rather than adding one. */
function isHotSwap(clients: ClientsState): boolean {
  return clients.list.some((c) => c.name === clients.draft.name);
}

export class AttachDraftError extends Error {
  override readonly name = 'AttachDraftError';
  constructor(
    readonly field: keyof AttachDraft,
    message: string,
  ) {
    super(message);
  }
}

/** The POST /api/clients body for the draft, or an AttachDraftError naming the field to fix. */
function attachRequest(draft: AttachDraft): AttachClientRequest {
  if (!draft.script) throw new AttachDraftError('script', 'Drop an agent script first');
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(draft.name))
    throw new AttachDraftError('name', 'Use 1–64 letters, digits, dot, dash or underscore');
  if (!draft.model) throw new AttachDraftError('model', 'Choose the model the script trains');
  const tasks = draft.inlineTasks
    ? { inline: draft.inlineTasks as Task[] }
    : draft.tasksPath.trim()
      ? { path: draft.tasksPath.trim() }
      : null;
  if (!tasks)
    throw new AttachDraftError('tasksPath', 'Give a task file (a path on the peer, or drop a .jsonl file)');
  const script =
    'path' in draft.script
      ? { path: draft.script.path }
      : { content: draft.script.content, filename: draft.script.filename };
  return {
    name: draft.name,
    script,
    tasks,
    model: draft.model,
    repeat: draft.repeat,
    concurrency: draft.concurrency,
    weight: draft.weight,
  };
}

/** Tasks from a JSONL file's text (one JSON object with an `id` per line; blank lines skipped). */
function parseTaskLines(text: string): Record<string, unknown>[] {
  const tasks: Record<string, unknown>[] = [];
  text.split(/\r?\n/).forEach((line, index) => {
    if (!line.trim()) return;
    let task: unknown;
    try {
      task = JSON.parse(line);
    } catch {
      throw new AttachDraftError('inlineTasks', `Line ${index + 1} of the task file is not JSON`);
    }
    if (typeof task !== 'object' || task === null || !('id' in task))
      throw new AttachDraftError('inlineTasks', `Line ${index + 1} has no "id"`);
    tasks.push(task as Record<string, unknown>);
  });
  if (tasks.length === 0) throw new AttachDraftError('inlineTasks', 'The task file has no tasks');
  return tasks;
}

export const clientsSelectors = {
  episodesPerSecond,
  completionRate,
  selectedClient,
  runsChangeKey,
  failures,
  isHotSwap,
  attachRequest,
  parseTaskLines,
};
