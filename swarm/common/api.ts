/**
 * Control-API payloads shared by the peer runtime and every client of it (renderer, CLI, tests).
 * Pure types and zod schemas: no Node APIs here.
 */
import { z } from 'zod';
import type { TrainMetrics } from '../../worker/common/engine.ts';
import type { RunnerEvent, RunnerIsolation } from './runner-api.ts';
import type { ModelStatus } from './swarm-api.ts';
import type { RunSummary } from './runs-api.ts';
import type { StudySummary } from './research-api.ts';

/** A hosted model's state (the swarm protocol's status carries it too, so it is defined there). */
export type { ModelStatus } from './swarm-api.ts';

export const roleSchema = z.enum(['server', 'client']);
export type Role = z.infer<typeof roleSchema>;

/** Merge totals over many episodes (`GET /api/ui/savings`). */
/**
 * How much of an episode its GRPO group shares (GET /api/ui/episodes/:id/group): the tokens of its timelines that
 * the group's other episodes also hold as a common prefix, which tree training computes once for all of them.
 */
export interface EpisodeGroupShare {
  groupId: string;
  /** `step`: the episodes one step trained together; `queued`: ended and waiting together; `alone`: no other. */
  basis: 'step' | 'queued' | 'alone';
  /** Episodes in the group, this one included. */
  episodes: number;
  /** This episode's stored timeline tokens, and how many of them the rest of its group shares. */
  tokens: number;
  sharedTokens: number;
  /** The group's timelines as rows (Σ lengths) and as one prefix tree. */
  groupMergedTokens: number;
  groupTreeTokens: number;
}

export interface MergeTotals {
  model: string | null;
  episodes: number;
  calls: number;
  naiveTokens: number;
  mergedTokens: number;
  savedTokens: number;
  /** naive ÷ merged (1 when there are no tokens). */
  tokenRatio: number;
}

/** A peer of the swarm as `GET /api/peers` lists it (this peer first), from its presence announcements. */
export interface SwarmPeer {
  peerId: string;
  self: boolean;
  connected: boolean;
  /** ISO time of its last announcement (null for this peer). */
  lastSeen: string | null;
  roles: string[];
  models: Array<{ name: string; policyVersion: number }>;
  pool: { load: number; capacity: number };
  clientScripts: string[];
}

/** `GET /api/peers` (only when the peer is in a swarm; 404 otherwise). */
export interface PeersResponse {
  swarm: string;
  peerId: string;
  addresses: string[];
  peers: SwarmPeer[];
}

/** `POST /api/swarm/create`: a new private swarm (fresh key); the name defaults to `lab`. */
export const createSwarmRequestSchema = z.strictObject({
  name: z.string().min(1).max(64).optional(),
  /** Multiaddrs (with /p2p/<id>) put into the token for machines mDNS cannot see. */
  bootstrap: z.array(z.string().min(1).max(512)).max(64).optional(),
});
export type CreateSwarmRequest = z.infer<typeof createSwarmRequestSchema>;

/** `POST /api/swarm/join`: the token another peer's create printed. */
export const joinSwarmRequestSchema = z.strictObject({ token: z.string().min(1).max(16_384) });
export type JoinSwarmRequest = z.infer<typeof joinSwarmRequestSchema>;

/**
 * `GET /api/swarm` and the answer of create / join / leave: whether this peer is in a swarm, and the token that
 * lets other machines join it (a secret like a password: the control API is behind the bearer token).
 */
export interface SwarmMembership {
  joined: boolean;
  /** Started with --no-p2p: create and join are refused until the peer is restarted without it. */
  disabled: boolean;
  swarm: string | null;
  token: string | null;
  peerId: string | null;
  addresses: string[];
}

/** The line `agentjet node|serve --json` prints on stdout once the peer is ready (what peer-process starters wait for). */
export interface PeerReadyLine {
  event: 'ready';
  port: number;
  apiUrl: string;
  gatewayUrl: string;
  uiUrl: string;
  token: string;
  dataDir: string;
  nodeId: string;
  models: Array<{ name: string; aliases: readonly string[]; state: string }>;
  /** The training run each model trains (absent for a model whose training has not started). */
  runs?: Array<{ model: string; id: string; name: string; step: number }>;
  p2p: { peerId: string; swarm: string; addresses: string[] } | null;
}

export interface StatusPayload {
  app: 'agentjet';
  version: string;
  nodeId: string;
  startedAt: string;
  uptimeS: number;
  roles: Role[];
  dataDir: string;
  /** The tfjs backend the trainer engines use, with why (null until an engine has started). */
  backend: { name: string; reason: string } | null;
  urls: { api: string; gateway: string; ui: string };
  models: ModelStatus[];
  store: { path: string; schemaVersion: number; episodes: number };
  p2p: { enabled: boolean; peerId: string | null; peers: number; swarm: string | null };
  /** How attached scripts are isolated on this peer (absent where the peer runs no client runner). */
  isolation?: RunnerIsolation;
}

/** Messages pushed over the control API's WebSocket (`/api/events`). */
export type ServerEvent =
  | { type: 'status'; data: StatusPayload }
  | { type: 'log'; data: { level: 'debug' | 'info' | 'warn' | 'error'; msg: string; time: string } }
  | RunnerEvent
  | { type: 'train-step'; data: TrainStepSummary }
  /** A run was created, or its status, events or warnings changed (runs-api.ts). */
  | { type: 'run'; data: RunSummary }
  /** A study was created, or its status or runs changed (research-api.ts). */
  | { type: 'study'; data: StudySummary };

/** One optimizer step of a hosted model's training loop (GET /api/models/:name/steps, `train-step` events). */
export interface TrainStepSummary {
  model: string;
  step: number;
  /** The policy version the step produced. */
  policyVersion: number;
  /** ISO time the step finished. */
  time: string;
  groups: number;
  episodes: number;
  /** Samples handed to the engine (timelines, or calls in naive mode). */
  samples: number;
  rewardMean: number;
  /** Population standard deviation of the batch's rewards (absent on steps stored before it was recorded). */
  rewardStd?: number;
  /**
   * Share of the batch's episodes whose own `success` flag (reported at `end` by the agent or grader) is true; an
   * episode without a flag counts as not successful. Null when no episode of the batch reported one; absent on
   * steps stored before it was recorded. Steps stored before this meaning hold the share with reward ≥ 1.
   */
  successRate?: number | null;
  /** Tokens the batch would hold with one sample per LLM call (naive), against `metrics.tokens` merged. */
  naiveTokens?: number;
  /**
   * When a restart went back to an earlier checkpoint and this step's update was lost (its episodes were queued
   * again); null while it stands. Absent on answers from peers before it was recorded.
   */
  revertedAt?: string | null;
  metrics: Omit<TrainMetrics, 'policyVersion'>;
  /** The checkpoint folder written after this step, if any. */
  checkpoint: string | null;
  /**
   * Groups left out since the previous step because every episode in them had the same reward (zero advantage
   * everywhere), and their share of all groups completed since then. Absent on steps stored before it was recorded.
   */
  discardedGroups?: number;
  discardedShare?: number;
  /** Mean tokens the policy generated per episode of the batch (the trained tokens ÷ episodes). */
  responseTokensMean?: number;
  /** How many policy versions behind the step's starting weights the batch's episodes were sampled: mean and max. */
  policyLagMean?: number;
  policyLagMax?: number;
  /** Episodes dropped as stale (more than the lag bound behind) since the previous step; absent on older steps. */
  droppedStale?: number;
  /**
   * Wall time of the step's phases: rollout (from the previous step's end until the batch was ready), drain (until
   * the episodes in flight finished) and update (the optimizer step, checkpoint and record), in ms; and the tokens the
   * batch's episodes generated per second of rollout.
   */
  phases?: { rolloutMs: number; drainMs: number; updateMs: number };
  /**
   * The share of the step's wall time (its three phases) in which the sampler had a generation under way: with a
   * separate sampler it overlaps the update; on a shared engine a call held by the update counts. Absent on older
   * steps.
   */
  samplerBusyShare?: number;
  rolloutTokensPerS?: number;
  /** The training run the step belongs to (runs-api.ts); absent on steps stored before runs were recorded. */
  runId?: string | null;
}

/** A step as a run's charts read it (`GET /api/runs/:id/steps`): the model's step plus where it sits in the run. */
export interface RunStep extends TrainStepSummary {
  runId: string;
  /** The step's number within the run (model step − the run's stepOffset). */
  runStep: number;
}

/** Every control-API error body. */
export interface ApiErrorBody {
  error: { name: string; message: string; field?: string };
}

/** A saved checkpoint of a model's training loop (GET /api/models/:name/checkpoints). */
export interface CheckpointInfo {
  step: number;
  policyVersion: number;
  /** ISO time it was written. */
  time: string;
  /** Its folder on the peer (a Hugging Face model folder, or a PEFT adapter). */
  dir: string;
  files: string[];
}
