/**
 * Chaos and fuzz figures: seeded, structure-aware fuzzing (fast-check) of a real peer on 127.0.0.1 — the gateway,
 * the swarm protocol, every control-API route, raw request lines and headers — and of every decoder of what
 * others send (p2p frames and schemas, swarm tokens, signed manifests, safetensors, model configs and folders,
 * task files). Targets: crashes 0, status_5xx 0 (503/507 are documented and allowed), state_changes_from_rejected
 * 0, valid_after_batch_failures 0, decoder_unexpected_errors 0. The harness is swarm/node/testing/fuzz/.
 *
 *   npm run bench -- chaos [--json] [--seed N] [--requests N] [--concurrent N] [--cases N] [--sections http,decoders]
 *
 * One function per section returns its figures: http and decoders (the fuzzing), sigkill (SIGKILL at random points
 * of the training loop, the crash-consistency invariant after every restart), sandbox (hostile agents against the
 * runner's isolation), disk (a full disk under a running peer), backpressure (refused starts while a server is
 * busy) and restart (a swarm's server killed and started again: its client resumes by itself). Targets: crashes 0, status_5xx 0, state_changes_from_rejected 0, acked_lost 0, acked_untrained_unmarked 0,
 * double_trained 0, version_regressions 0, sandbox_escapes 0 (with bubblewrap), disk_full_crash false,
 * refused_starts_per_s_max ≤ 1 per client per Retry-After, client_resumed_after_server_restart (within 10 s).
 */
import { parseArgs } from 'node:util';
import { runHostileAgents } from '../swarm/node/runner/testing/hostile/index.ts';
import { runBackPressureChaos } from '../swarm/node/testing/chaos/back-pressure.ts';
import { runDiskFullChaos } from '../swarm/node/testing/chaos/disk-full.ts';
import { runServerRestartChaos } from '../swarm/node/testing/chaos/server-restart.ts';
import { runSigkillChaos } from '../swarm/node/testing/chaos/sigkill.ts';
import { runDecoderFuzz } from '../swarm/node/testing/fuzz/decoders.ts';
import { runHttpFuzz } from '../swarm/node/testing/fuzz/http-fuzz.ts';
import { formatTable, type BenchContext, type Row } from './report.ts';

/** At least this many fuzz requests by default: enough to reach the rare raw and deep-nesting variants. */
const DEFAULT_REQUESTS = 5_000;
/** Then this many with 16 in flight and some clients hanging up (crashes, 5xx and liveness checked). */
const DEFAULT_CONCURRENT_REQUESTS = 1_000;
/** Requests between liveness checks and episode-pool refreshes. */
const BATCH_SIZE = 100;
/** Inputs per decoder (disk-backed decoders take a fifth of it). */
const DEFAULT_DECODER_CASES = 1_000;
/** SIGKILLs by default: the issue's ≥ 10, each at a random point of the train loop. */
const DEFAULT_SIGKILLS = 10;
/** Failures listed in the JSON result; the counts go on past it. */
const FAILURES_LISTED = 50;

interface SectionOptions {
  seed: number;
  requests: number;
  concurrentRequests: number;
  decoderCases: number;
  sigkills: number;
  log: (line: string) => void;
}
type Section = (options: SectionOptions) => Promise<Record<string, unknown>>;

async function httpSection(options: SectionOptions): Promise<Record<string, unknown>> {
  const f = await runHttpFuzz({
    seed: options.seed,
    requests: options.requests,
    concurrentRequests: options.concurrentRequests,
    batchSize: BATCH_SIZE,
    log: options.log,
  });
  return {
    requests: f.requests,
    crashes: f.crashes,
    status_5xx: f.status_5xx,
    state_changes_from_rejected: f.state_changes_from_rejected,
    valid_after_batch_failures: f.valid_after_batch_failures,
    timeouts: f.timeouts,
    no_answer: f.no_answer,
    accepted: f.accepted,
    rejected: f.rejected,
    concurrent_requests: f.concurrent_requests,
    hung_up: f.hung_up,
    http_duration_s: f.duration_s,
    requests_per_s: Math.round((f.requests / Math.max(f.duration_s, 0.1)) * 10) / 10,
    p50_request_ms: f.p50_request_ms,
    by_status: f.by_status,
    by_family: f.by_family,
    slowest: f.slowest,
    http_failures: f.failures.slice(0, FAILURES_LISTED),
  };
}

async function decoderSection(options: SectionOptions): Promise<Record<string, unknown>> {
  const started = performance.now();
  const f = await runDecoderFuzz({ seed: options.seed, casesPerTarget: options.decoderCases });
  return {
    decoder_cases: f.cases,
    decoder_unexpected_errors: f.unexpected_errors,
    decoder_duration_s: Math.round((performance.now() - started) / 100) / 10,
    decoder_targets: f.targets,
    decoder_findings: f.findings.slice(0, FAILURES_LISTED),
  };
}

const SECTIONS: Record<string, Section> = {
  http: httpSection,
  decoders: decoderSection,
  sigkill: async (options) => ({ ...(await runSigkillChaos({ seed: options.seed, kills: options.sigkills, log: options.log })) }),
  sandbox: async () => ({ ...(await runHostileAgents()) }),
  disk: async () => ({ ...(await runDiskFullChaos()) }),
  backpressure: async () => ({ ...(await runBackPressureChaos()) }),
  restart: async () => ({ ...(await runServerRestartChaos()) }),
};

export default async function chaosBench(ctx: BenchContext) {
  const { values } = parseArgs({
    args: ctx.args,
    options: {
      seed: { type: 'string' },
      requests: { type: 'string' },
      concurrent: { type: 'string' },
      cases: { type: 'string' },
      sigkills: { type: 'string' },
      sections: { type: 'string' },
    },
  });
  const seed = values.seed !== undefined ? Number(values.seed) : Date.now() % 2 ** 31;
  const requests = Number(values.requests ?? DEFAULT_REQUESTS);
  const concurrentRequests = Number(values.concurrent ?? DEFAULT_CONCURRENT_REQUESTS);
  const decoderCases = Number(values.cases ?? DEFAULT_DECODER_CASES);
  const sigkills = Number(values.sigkills ?? DEFAULT_SIGKILLS);
  const names = values.sections ? values.sections.split(',') : Object.keys(SECTIONS);
  for (const name of names) if (!SECTIONS[name]) throw new Error(`unknown section ${name}; sections: ${Object.keys(SECTIONS).join(', ')}`);
  ctx.log(`chaos seed ${seed} (replay: npm run bench -- chaos --seed ${seed})`);

  const result: Record<string, unknown> = { seed };
  const rows: Row[] = [];
  for (const name of names) {
    ctx.log(`section ${name}`);
    const figures = await SECTIONS[name]({ seed, requests, concurrentRequests, decoderCases, sigkills, log: ctx.log });
    Object.assign(result, figures);
    const row: Row = { section: name };
    for (const [key, value] of Object.entries(figures)) if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'string') row[key] = value;
    rows.push(row);
  }
  process.stdout.write(`seed ${seed}\n`);
  for (const row of rows) process.stdout.write(formatTable([row]) + '\n\n');
  const failures = [...((result.http_failures as unknown[] | undefined) ?? []), ...((result.decoder_findings as unknown[] | undefined) ?? [])];
  if (failures.length > 0) process.stdout.write(`failures (first ${failures.length}):\n${failures.map((f) => JSON.stringify(f)).join('\n')}\n`);
  return result;
}
