/**
 * p2p throughput and latency, two node processes on loopback in one private swarm:
 * - weights_mb_per_s: a blob fetched through /agentjet/weights/1 (manifest and offer over pnet + noise + yamux,
 *   chunk bytes over the direct AES-256-GCM channel, sha256 per chunk, written to disk and synced),
 *   publisher and fetcher in separate processes;
 * - weights_libp2p_mb_per_s: the same fetch with every byte on the libp2p stream (the fallback path);
 * - raw_tcp_mb_per_s: the same bytes over a plain loopback TCP socket between two processes;
 * - libp2p_stream_mb_per_s: the same bytes over a bare libp2p stream (same transport stack, no agentjet
 *   protocol), to tell the protocol's cost from the transport's;
 * - weights_vs_raw: weights / raw TCP (target ≥ 0.5); weights_libp2p_vs_raw: the fallback path's;
 * - weights_cpu_ms_per_mb: CPU time of both peer processes (all threads) per MB of a direct fetch: steadier than the
 *   throughput on a machine shared with other jobs, where the wall clock mostly measures the scheduler;
 * - load_avg_1m: the machine's 1-minute load average as each round starts (median), next to `cores`: how shared the
 *   machine was while the throughputs were measured;
 * - infer_frame_rtt_ms_p50: one request → one frame over /agentjet/infer/1, median of many.
 * With a model (two peer runtimes in this process, builtin:tiny on the server peer, none on the client peer):
 * - relay_overhead_ms_p50: a one-token chat completion through the client peer's gateway (relayed over
 *   /agentjet/infer/1) minus the same call on the server peer's own gateway, medians of interleaved calls;
 * - full_weights_bytes / lora_delta_bytes: what a weights publish carries for the model, full safetensors vs
 *   the PEFT adapter when LoRA (rank 8 on q_proj, v_proj) is on.
 *
 * One direct fetch runs first as a warm-up and is not counted. The transfers run in --rounds rounds (back to back, so each ratio compares neighbours on a machine whose load
 * drifts); every figure is the median over the rounds.
 *
 * Args: --mb=N (blob size, default 64), --rounds=N (default 3), --rtt=N (infer round trips, default 200), --open (no pnet key),
 * --relay=N (relayed calls, default 40; 0 skips the model part), --model=SOURCE (default builtin:tiny).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSwarmToken, generateSwarmKey } from '../p2p/swarm-token/token.ts';
import { serializeSafetensors } from '../worker/checkpoint/safetensors.ts';
import { startEngine } from '../worker/node/engine-client.ts';
import { parseModelSource, defaultModelName } from '../swarm/node/models/model-spec.ts';
import { PeerRuntime } from '../swarm/node/runtime.ts';
import type { CreateEpisodeResponse } from '../swarm/common/swarm-api.ts';
import { startPeerProcess } from '../p2p/testing/peer-processes.ts';
import type { DownloadStats } from '../p2p/protocols/weights/download.ts';
import type { FetchWeightsResult } from '../p2p/protocols/weights/weights.ts';
import type { SignedManifest } from '../p2p/protocols/weights/manifest.ts';
import { formatTable } from './report.ts';
import type { BenchContext } from './report.ts';

function numberArg(ctx: BenchContext, name: string, fallback: number): number {
  const arg = ctx.args.find((a) => a.startsWith(`--${name}=`));
  return arg ? Number(arg.split('=')[1]) : fallback;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/** Receive `path`'s bytes from a child process over loopback TCP; returns seconds from connect to last byte. */
async function rawTcpSeconds(path: string, totalBytes: number): Promise<number> {
  let received = 0;
  let started = 0;
  const done = Promise.withResolvers<number>();
  const server = createServer((socket) => {
    started = performance.now();
    socket.on('data', (chunk: Buffer) => {
      received += chunk.byteLength;
      if (received >= totalBytes) done.resolve((performance.now() - started) / 1000);
    });
    socket.on('error', done.reject);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const sender = `const fs=require('fs'),net=require('net');const b=fs.readFileSync(process.argv[2]);const s=net.connect(Number(process.argv[1]),'127.0.0.1',()=>s.end(b));`;
  const child = spawn(process.execPath, ['-e', sender, String(port), path], { stdio: 'inherit' });
  try {
    return await done.promise;
  } finally {
    child.kill();
    server.close();
  }
}

export default async function p2pBench(ctx: BenchContext): Promise<Record<string, unknown>> {
  const megabytes = numberArg(ctx, 'mb', 64);
  const roundTrips = numberArg(ctx, 'rtt', 200);
  const relayCalls = numberArg(ctx, 'relay', 40);
  const repeats = numberArg(ctx, 'rounds', 3);
  const modelSource = ctx.args.find((a) => a.startsWith('--model='))?.split('=')[1] ?? 'builtin:tiny';
  const totalBytes = megabytes * 1024 * 1024;
  const dir = await mkdtemp(join(tmpdir(), 'agentjet-bench-p2p-'));
  const blobPath = join(dir, 'blob.bin');
  await writeFile(blobPath, randomBytes(totalBytes));

  // --open: no pre-shared key, to see what pnet costs.
  const open = ctx.args.includes('--open');
  const common = { ...(open ? {} : { swarm: { name: 'bench', key: generateSwarmKey() } }), listen: ['/ip4/127.0.0.1/tcp/0'], mdns: false };
  ctx.log('starting two peer processes…');
  const [publisher, fetcher] = await Promise.all([
    startPeerProcess({ ...common, dataDir: join(dir, 'publisher') }),
    startPeerProcess({ ...common, dataDir: join(dir, 'fetcher') }),
  ]);
  try {
    await fetcher.send({ cmd: 'dial', address: publisher.multiaddrs[0] });
    ctx.log(`hashing and publishing ${megabytes} MB…`);
    const signed = await publisher.send<SignedManifest>({ cmd: 'publish-weights', model: 'bench', version: 1, path: blobPath });

    const cpuMs = async () => {
      const usages = await Promise.all([publisher, fetcher].map((peer) => peer.send<NodeJS.CpuUsage>({ cmd: 'cpu-usage' })));
      return usages.reduce((sum, usage) => sum + (usage.user + usage.system) / 1000, 0);
    };
    let lastFetchCpuMs = 0;
    /** Seconds to fetch the blob, checking that it all came over the expected path; its CPU time in lastFetchCpuMs. */
    const fetchSeconds = async (direct: boolean): Promise<number> => {
      const destPath = join(dir, direct ? 'fetched-direct.bin' : 'fetched-libp2p.bin');
      const cpuBefore = await cpuMs();
      const started = performance.now();
      const { stats, chunksByPath } = await fetcher.send<{ stats: DownloadStats; chunksByPath: FetchWeightsResult['chunksByPath'] }>({
        cmd: 'fetch-weights',
        signed,
        providers: [publisher.peerId],
        destPath,
        direct,
      });
      const seconds = (performance.now() - started) / 1000;
      lastFetchCpuMs = (await cpuMs()) - cpuBefore;
      await rm(destPath, { force: true });
      if (stats.bytesFetched !== totalBytes) throw new Error(`fetched ${stats.bytesFetched} of ${totalBytes} bytes`);
      if ((direct ? chunksByPath.libp2p : chunksByPath.direct) > 0) throw new Error(`chunks took the other path: ${JSON.stringify(chunksByPath)}`);
      return seconds;
    };
    // One uncounted fetch first: a peer fetches weights after every training step, so the steady state (JIT
    // compiled, the blob in the provider's page cache) is what matters, not a process's first fetch.
    ctx.log('warm-up fetch (not counted)…');
    await fetchSeconds(true);
    // Rounds of back-to-back transfers: on a shared machine the load drifts, so each ratio compares neighbours
    // and the medians are reported.
    const rounds: Array<{ load: number; direct: number; directCpuMsPerMb: number; libp2p: number; blast: number; raw: number }> = [];
    for (let round = 1; round <= repeats; round++) {
      ctx.log(`round ${round}/${repeats}: weights (direct channel), weights (libp2p stream), bare libp2p stream, raw TCP…`);
      const load = loadavg()[0];
      const direct = await fetchSeconds(true);
      const directCpuMsPerMb = lastFetchCpuMs / megabytes;
      const libp2p = await fetchSeconds(false);
      const blast = await fetcher.send<{ received: number; seconds: number }>({ cmd: 'blast-receive', peer: publisher.peerId, bytes: totalBytes });
      const raw = await rawTcpSeconds(blobPath, totalBytes);
      rounds.push({ load, direct: megabytes / direct, directCpuMsPerMb, libp2p: megabytes / libp2p, blast: megabytes / blast.seconds, raw: megabytes / raw });
    }

    ctx.log(`${roundTrips} infer round trips…`);
    await fetcher.send({ cmd: 'infer-rtt', peer: publisher.peerId, count: 10 }); // warm-up
    const rtts = await fetcher.send<number[]>({ cmd: 'infer-rtt', peer: publisher.peerId, count: roundTrips });

    const model = relayCalls > 0 ? await modelMetrics(ctx, join(dir, 'runtimes'), modelSource, relayCalls) : undefined;
    const weightsMbPerS = median(rounds.map((r) => r.direct));
    const weightsLibp2pMbPerS = median(rounds.map((r) => r.libp2p));
    const rawMbPerS = median(rounds.map((r) => r.raw));
    const result = {
      private_swarm: !open,
      blob_mb: megabytes,
      chunk_bytes: JSON.parse(signed.manifest).chunkSize as number,
      weights_mb_per_s: weightsMbPerS,
      weights_libp2p_mb_per_s: weightsLibp2pMbPerS,
      libp2p_stream_mb_per_s: median(rounds.map((r) => r.blast)),
      raw_tcp_mb_per_s: rawMbPerS,
      weights_vs_raw: median(rounds.map((r) => r.direct / r.raw)),
      weights_libp2p_vs_raw: median(rounds.map((r) => r.libp2p / r.raw)),
      weights_cpu_ms_per_mb: median(rounds.map((r) => r.directCpuMsPerMb)),
      load_avg_1m: median(rounds.map((r) => r.load)),
      cores: availableParallelism(),
      rounds,
      infer_frame_rtt_ms_p50: median(rtts),
      infer_round_trips: rtts.length,
      ...model,
    };
    const modelRows = model
      ? [
          { metric: 'relay_overhead_ms_p50', value: model.relay_overhead_ms_p50 },
          { metric: 'full_weights_bytes', value: model.full_weights_bytes },
          { metric: 'lora_delta_bytes', value: model.lora_delta_bytes },
        ]
      : [];
    process.stdout.write(
      formatTable([
        ...modelRows,
        { metric: 'weights_mb_per_s', value: result.weights_mb_per_s },
        { metric: 'weights_libp2p_mb_per_s', value: result.weights_libp2p_mb_per_s },
        { metric: 'libp2p_stream_mb_per_s', value: result.libp2p_stream_mb_per_s },
        { metric: 'raw_tcp_mb_per_s', value: result.raw_tcp_mb_per_s },
        { metric: 'weights_vs_raw', value: result.weights_vs_raw },
        { metric: 'weights_libp2p_vs_raw', value: result.weights_libp2p_vs_raw },
        { metric: 'weights_cpu_ms_per_mb', value: result.weights_cpu_ms_per_mb },
        { metric: 'load_avg_1m', value: result.load_avg_1m },
        { metric: 'cores', value: result.cores },
        { metric: 'infer_frame_rtt_ms_p50', value: result.infer_frame_rtt_ms_p50 },
      ]) + '\n',
    );
    return result;
  } finally {
    await Promise.allSettled([publisher.stop(), fetcher.stop()]);
    await rm(dir, { recursive: true, force: true });
  }
}

/** LoRA settings of the delta measurement: a common small adapter. */
const BENCH_LORA = { rank: 8, alpha: 16, targetModules: ['q_proj', 'v_proj'] };

/** Relay overhead through a client peer, and full-weights vs LoRA-adapter publish sizes, for one model. */
async function modelMetrics(ctx: BenchContext, dir: string, sourceText: string, calls: number): Promise<Record<string, number>> {
  const source = parseModelSource(sourceText);
  const name = defaultModelName(source);
  const swarmToken = createSwarmToken({ name: 'bench' });
  const quiet = { port: 0, consoleLogLevel: 'silent' as const, training: { autoStart: false } };
  const p2p = { swarmToken, listen: ['/ip4/127.0.0.1/tcp/0'], mdns: false, presenceIntervalMs: 200 };
  ctx.log(`starting a server peer (${sourceText}) and a client peer…`);
  const server = await PeerRuntime.start({ ...quiet, dataDir: join(dir, 'server'), models: [{ name, source, aliases: [], poolLimit: 8 }], p2p });
  const client = await PeerRuntime.start({ ...quiet, dataDir: join(dir, 'client'), p2p: { ...p2p, bootstrap: [server.p2p!.node.multiaddrs()[0]] } });
  try {
    while (client.p2p!.remote.candidates(name).length === 0) await new Promise((resolve) => setTimeout(resolve, 50));
    const res = await fetch(`http://127.0.0.1:${client.port}/swarm/v1/episodes`, {
      method: 'POST',
      headers: { authorization: `Bearer ${client.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: name, taskId: 'bench', kind: 'eval' }),
    });
    const episode = (await res.json()) as CreateEpisodeResponse;
    const call = async (gateway: string) => {
      const started = performance.now();
      const answer = await fetch(`${gateway}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${episode.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: name, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1, temperature: 0 }),
      });
      if (!answer.ok) throw new Error(`chat completion failed: HTTP ${answer.status} ${await answer.text()}`);
      await answer.arrayBuffer();
      return performance.now() - started;
    };
    ctx.log(`${calls} relayed and ${calls} direct one-token calls…`);
    await call(client.urls.gateway); // warm-up
    const relayed: number[] = [];
    const direct: number[] = [];
    for (let i = 0; i < calls; i++) {
      relayed.push(await call(client.urls.gateway));
      direct.push(await call(server.urls.gateway));
    }

    ctx.log('weights sizes: full vs LoRA adapter…');
    const fullBytes = serializeSafetensors(await server.serving.models.find(name)!.engine.getWeights()).byteLength;
    const lora = await startEngine({ source, lora: BENCH_LORA });
    let loraBytes = 0;
    try {
      const adapterDir = join(dir, 'adapter');
      await lora.save(adapterDir);
      for (const file of await readdir(adapterDir)) if (file.endsWith('.safetensors')) loraBytes += (await stat(join(adapterDir, file))).size;
    } finally {
      await lora.close();
    }
    return {
      relay_overhead_ms_p50: median(relayed) - median(direct),
      relayed_call_ms_p50: median(relayed),
      direct_call_ms_p50: median(direct),
      full_weights_bytes: fullBytes,
      lora_delta_bytes: loraBytes,
      lora_vs_full: loraBytes / fullBytes,
    };
  } finally {
    await Promise.allSettled([client.stop(), server.stop()]);
  }
}
