/**
 * SIGKILL at random points of the training loop, with the crash-consistency invariant checked after every restart.
 * A peer runs in a child process (p2p/testing/runtime-processes.ts) hosting builtin:tiny with a small GRPO batch;
 * an agent here drives episodes over HTTP; at a random moment — right after a step was announced (a checkpoint may
 * be being written), while an end is being acknowledged, or while episodes are in flight — the peer is killed with
 * SIGKILL and started again on the same data dir. After each restart, read from its store:
 *
 *   acked_lost                 acknowledged ends whose row is gone or no longer reads as ended/trained/discarded
 *   acked_untrained_unmarked   acknowledged episodes marked trained without a standing step that used them
 *   double_trained             episodes used by more than one standing step
 *   version_regressions        a restart whose policy version is below one already announced, or a version that
 *                              names two standing steps
 *
 * Ended episodes that no step used and nothing marked are queued again at start (the queue is rebuilt from the
 * store), so they are neither lost nor unmarked.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { seededRandom } from '../../../../worker/common/random.ts';
import type { ServerEvent, StatusPayload } from '../../../common/api.ts';
import type { CreateEpisodeResponse } from '../../../common/swarm-api.ts';
import { startRuntimeProcess, type RuntimeProcess } from '../../p2p/testing/runtime-processes.ts';
import type { PeerOptions } from '../../runtime.ts';
import { openStore } from '../../store/db.ts';
import { getEpisode } from '../../store/episode-reads.ts';
import { listTrainSteps, stepsOfEpisode } from '../../store/train-steps.ts';

/** Small batches, frequent steps and checkpoints: many chances to be killed in the middle of one. */
const TRAINING = { batchTasks: 1, groupSize: 2, checkpointEvery: 2, maxPolicyLag: 100, train: { learningRate: 1e-3 } };
/** Tokens per answer: enough to train on, few enough to keep a round short. */
const MAX_TOKENS = 4;
/** A kill lands at most this long after the moment chosen for it (so it falls inside the step or write). */
const MAX_KILL_DELAY_MS = 400;
/** Episodes an agent runs before the kill is due, at most (a round is at least one group). */
const MAX_EPISODES_PER_ROUND = 6;

export interface SigkillFigures {
  sigkills: number;
  acked_ends: number;
  acked_lost: number;
  acked_untrained_unmarked: number;
  double_trained: number;
  version_regressions: number;
  steps_trained: number;
  sigkill_duration_s: number;
}

/** A model that updates answers begins with 503: the agent waits as a runner would, this many times at most. */
const BEGIN_ATTEMPTS = 40;
const BEGIN_RETRY_MS = 250;

async function begin(peer: RuntimeProcess, taskId: string): Promise<CreateEpisodeResponse | null> {
  for (let attempt = 0; attempt < BEGIN_ATTEMPTS; attempt++) {
    const begun = await peer.post('/swarm/v1/episodes', { model: 'tiny', taskId, sampling: { max_tokens: MAX_TOKENS } }).catch(() => null);
    if (begun?.status === 201) return begun.body as unknown as CreateEpisodeResponse;
    if (begun?.status !== 503 && begun?.status !== 429) return null;
    await new Promise((resolve) => setTimeout(resolve, BEGIN_RETRY_MS));
  }
  return null;
}

async function chat(episode: CreateEpisodeResponse): Promise<boolean> {
  const res = await fetch(`${episode.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${episode.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: `Count to three (${episode.episodeId}).` }], max_tokens: MAX_TOKENS }),
  }).catch(() => null);
  await res?.body?.cancel();
  return res?.status === 200;
}

/** The highest policy version the peer announced (train-step events and its status) while it ran. */
function watchVersions(peer: RuntimeProcess): { highest(): number; close(): void } {
  let highest = 0;
  const ws = new WebSocket(`ws://127.0.0.1:${peer.port}/api/events?token=${peer.token}`);
  ws.on('message', (data) => {
    const event = JSON.parse(String(data)) as ServerEvent;
    if (event.type === 'train-step') highest = Math.max(highest, event.data.policyVersion);
    if (event.type === 'status') for (const m of event.data.models) highest = Math.max(highest, m.policyVersion);
  });
  ws.on('error', () => undefined);
  return { highest: () => highest, close: () => ws.terminate() };
}

/**
 * One round: episodes of one task in twos (a GRPO group: rewards 0 and 1), the kill at the chosen moment. Returns
 * the ids whose end the peer acknowledged.
 */
async function round(peer: RuntimeProcess, next: () => number, roundNo: number): Promise<string[]> {
  const acked: string[] = [];
  const episodes = 2 + Math.floor(next() * (MAX_EPISODES_PER_ROUND - 1));
  const moment = Math.floor(next() * 3); // 0: after a step is announced, 1: during an end, 2: episodes in flight
  const delay = Math.floor(next() * MAX_KILL_DELAY_MS);
  let killing: Promise<void> | undefined;
  const kill = () => (killing ??= new Promise<void>((resolve) => setTimeout(resolve, delay)).then(() => peer.kill()));
  const ws = new WebSocket(`ws://127.0.0.1:${peer.port}/api/events?token=${peer.token}`);
  ws.on('message', (data) => {
    if (moment === 0 && (JSON.parse(String(data)) as ServerEvent).type === 'train-step') void kill();
  });
  ws.on('error', () => undefined);
  try {
    for (let i = 0; i < episodes && !killing; i++) {
      const episode = await begin(peer, `task-${roundNo}-${Math.floor(i / 2)}`);
      if (!episode) break;
      if (!(await chat(episode))) break;
      const last = i === episodes - 1;
      if (last && moment === 2) {
        // Another episode is left in flight when the kill comes.
        void kill();
        break;
      }
      const end = peer.post(`/swarm/v1/episodes/${episode.episodeId}/end`, { reward: i % 2 });
      if (last && moment === 1) void kill();
      const answer = await end.catch(() => null);
      if (answer?.status === 200) acked.push(episode.episodeId);
    }
  } finally {
    await kill();
    ws.terminate();
  }
  return acked;
}

export async function runSigkillChaos(options: { seed: number; kills: number; log?: (line: string) => void }): Promise<SigkillFigures> {
  const started = performance.now();
  // The same seed kills at the same points of the agent's script.
  const next = seededRandom(options.seed);
  const dataDir = mkdtempSync(join(tmpdir(), 'agentjet-chaos-sigkill-'));
  const peerOptions: PeerOptions = {
    dataDir,
    port: 0,
    consoleLogLevel: 'silent',
    models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: 8 }],
    training: { config: TRAINING },
  };
  const figures: SigkillFigures = {
    sigkills: 0,
    acked_ends: 0,
    acked_lost: 0,
    acked_untrained_unmarked: 0,
    double_trained: 0,
    version_regressions: 0,
    steps_trained: 0,
    sigkill_duration_s: 0,
  };
  const acked = new Set<string>();
  let announced = 0;
  let peer = await startRuntimeProcess(peerOptions);
  try {
    for (let k = 0; k < options.kills; k++) {
      const versions = watchVersions(peer);
      for (const id of await round(peer, next, k)) acked.add(id);
      announced = Math.max(announced, versions.highest());
      versions.close();
      figures.sigkills++;
      peer = await startRuntimeProcess(peerOptions);
      const status = await peer.get<StatusPayload>('/api/status');
      const version = status.models[0]?.policyVersion ?? 0;
      if (version < announced) figures.version_regressions++;
      announced = Math.max(announced, version);
      options.log?.(`sigkill ${k + 1}/${options.kills}: ${acked.size} acknowledged ends so far, policy v${version}`);
    }
  } finally {
    await peer.stop();
  }
  // The invariant, read from the store of the peer as the last restart left it.
  const db = openStore(join(dataDir, 'agentjet.sqlite'));
  try {
    for (const id of acked) {
      const row = getEpisode(db, id);
      if (!row || !['ended', 'trained', 'discarded'].includes(row.state)) figures.acked_lost++;
      const steps = stepsOfEpisode(db, id);
      if (row?.state === 'trained' && steps.length === 0) figures.acked_untrained_unmarked++;
      if (steps.length > 1) figures.double_trained++;
    }
    const standing = listTrainSteps(db, 'tiny').filter((s) => !s.revertedAt);
    figures.steps_trained = standing.length;
    const versions = standing.map((s) => s.policyVersion);
    figures.version_regressions += versions.length - new Set(versions).size;
  } finally {
    db.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
  figures.acked_ends = acked.size;
  figures.sigkill_duration_s = Math.round((performance.now() - started) / 100) / 10;
  return figures;
}
