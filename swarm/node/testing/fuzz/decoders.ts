/**
 * Structure-aware fuzzing of what the peer decodes from others, in-process: p2p frames and every wire schema,
 * swarm join tokens, signed weight manifests, safetensors files, model config.json / adapter_config.json, model
 * folders on disk, and task files (JSONL, inline). Each decoder gets garbage and mutated valid input; it must
 * either accept it or reject it with its own named error. Anything else thrown (a TypeError, a RangeError from a
 * stack overflow, an error of another module) is an `unexpected` finding, kept with its input for the report.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import fc from 'fast-check';
import type { z } from 'zod';
import { encodeJsonFrame, FrameDecoder, decodeJsonFrame } from '../../../../p2p/framing/frames.ts';
import { PresenceMessage } from '../../../../p2p/presence/announcement.ts';
import type { Connection, Stream } from '@libp2p/interface';
import { memoryStream } from '../../../../p2p/framing/memory-stream.ts';
import { RequestEnvelope, ResponseFrame, serveJsonStream } from '../../../../p2p/protocols/shared/json-stream.ts';
import { ViolationTracker } from '../../../../p2p/protocols/shared/violations.ts';
import { EpisodeMessage } from '../../../../p2p/protocols/episode/episode.ts';
import { InferRequest } from '../../../../p2p/protocols/infer/infer.ts';
import { TrajectoriesRequest, TrajectoryRecord } from '../../../../p2p/protocols/trajectories/trajectories.ts';
import { MANIFEST_SIGNING_DOMAIN } from '../../../../p2p/protocols/weights/constants.ts';
import { SignedManifest, buildManifest, signManifest, verifyManifest } from '../../../../p2p/protocols/weights/manifest.ts';
import { WeightsRequest, WeightsResponseFrame } from '../../../../p2p/protocols/weights/wire.ts';
import { createSwarmToken, parseSwarmToken } from '../../../../p2p/swarm-token/token.ts';
import { parseDecoderConfig } from '../../../../worker/checkpoint/hf-config.ts';
import { parsePeftAdapterConfig } from '../../../../worker/checkpoint/peft-config.ts';
import { parseSafetensors, serializeSafetensors } from '../../../../worker/checkpoint/safetensors.ts';
import { readModelFolder } from '../../../../worker/node/hf-folder.ts';
import { openTaskSource, parseJsonl } from '../../runner/tasks.ts';
import { EpisodeRpc, EpisodeRpcAnswer, InferFrame, InferRelayRequest, WireHttpError } from '../../p2p/wire.ts';
import { mutated, toJsonText, unicodeString, weirdValue } from './json.ts';

/** Failures kept per target for the report; the count goes on past it. */
const MAX_FINDINGS_KEPT = 10;
/** Characters of an input shown in a finding. */
const INPUT_PREVIEW_CHARS = 300;
/** The frame cap the decoders run under: the smallest real one (episode messages, 256 KiB) is what matters. */
const FUZZ_MAX_FRAME_BYTES = 256 * 1024;
/** A bound on each read of the served stream (its bytes are all there, so reads never wait for it). */
const SERVE_READ_TIMEOUT_MS = 5_000;
/** What a served exchange may answer with besides its data and end frames: the named protocol errors. */
const SERVE_ERRORS = ['InvalidFrameError', 'FrameTooLargeError', 'UnsupportedVersionError', 'InvalidRequestError', 'UnexpectedEndOfStreamError'];
/** Disk-backed targets (model folders, task files) write a file per case: run this share of the cases. */
const DISK_CASE_SHARE = 0.2;

export interface Finding {
  target: string;
  input: string;
  error: string;
}
export interface TargetFigures {
  cases: number;
  accepted: number;
  rejected: number;
  unexpected: number;
}
export interface DecoderFigures {
  seed: number;
  cases: number;
  unexpected_errors: number;
  targets: Record<string, TargetFigures>;
  findings: Finding[];
}

export interface Target<T> {
  name: string;
  input: fc.Arbitrary<T>;
  /** Error names this decoder may reject with. */
  allowed: readonly string[];
  decode: (input: T) => unknown;
  share?: number;
}

function preview(value: unknown): string {
  let text: string;
  if (value instanceof Uint8Array) text = `bytes(${value.length}) ${Buffer.from(value.subarray(0, 120)).toString('hex')}`;
  else if (typeof value === 'string') text = JSON.stringify(value);
  else {
    try {
      text = toJsonText(value);
    } catch {
      // Parsed from text nested deeper than a recursive writer goes (10,000 levels): say so instead.
      text = '(a value nested too deep to print)';
    }
  }
  return text.length > INPUT_PREVIEW_CHARS ? `${text.slice(0, INPUT_PREVIEW_CHARS)}…(${text.length} chars)` : text;
}

const bytes = (text: string) => new TextEncoder().encode(text);

/** A frame arriving in random pieces: every frame is cut and decoded as the stream reader does. */
function decodeFrames(chunks: Uint8Array[], schema: z.ZodType<unknown>): unknown[] {
  const decoder = new FrameDecoder(FUZZ_MAX_FRAME_BYTES);
  const out: unknown[] = [];
  for (const chunk of chunks) {
    decoder.push(chunk);
    for (let frame = decoder.next(); frame; frame = decoder.next()) out.push(decodeJsonFrame(frame, schema));
  }
  return out;
}

/** Valid examples per wire schema, to mutate (the mutation keeps the frame well-formed or not, at random). */
const WIRE_SCHEMAS: { name: string; schema: z.ZodType<unknown>; valid: unknown }[] = [
  { name: 'RequestEnvelope', schema: RequestEnvelope, valid: { v: 1, body: { model: 'tiny', taskId: 't' } } },
  { name: 'ResponseFrame', schema: ResponseFrame, valid: { t: 'error', name: 'NotFoundError', message: 'gone' } },
  { name: 'EpisodeRpc', schema: EpisodeRpc, valid: { type: 'end', episodeId: 'ep-1', result: { reward: 1 } } },
  { name: 'EpisodeRpcAnswer', schema: EpisodeRpcAnswer, valid: { ok: false, error: { status: 409, name: 'EpisodeOverError', message: 'over', details: { code: 'x', headers: { 'retry-after': '1' } } } } },
  { name: 'WireHttpError', schema: WireHttpError, valid: { status: 503, name: 'DrainingError', message: 'm', details: {} } },
  { name: 'InferRelayRequest', schema: InferRelayRequest, valid: { apiKey: 'k', body: { model: 'tiny', messages: [{ role: 'user', content: 'hi' }] } } },
  { name: 'InferFrame', schema: InferFrame, valid: { type: 'head', status: 200, contentType: 'text/event-stream', retryAfter: null } },
  { name: 'EpisodeMessage', schema: EpisodeMessage, valid: { type: 'begin', request: {} } },
  { name: 'InferRequest', schema: InferRequest, valid: { apiKey: 'k', body: {} } },
  { name: 'TrajectoriesRequest', schema: TrajectoriesRequest, valid: { episodeIds: ['a', 'b'] } },
  { name: 'TrajectoryRecord', schema: TrajectoryRecord, valid: { id: 'a', calls: [] } },
  { name: 'WeightsRequest', schema: WeightsRequest, valid: { op: 'chunks', model: 'tiny', version: 3, sha256: 'a'.repeat(64), indices: [0, 1] } },
  { name: 'WeightsResponseFrame', schema: WeightsResponseFrame, valid: { t: 'direct', port: 4000, key: 'k' } },
  { name: 'SignedManifest', schema: SignedManifest, valid: { manifest: '{}', signer: 'p', signature: 's' } },
  {
    name: 'PresenceMessage',
    schema: PresenceMessage,
    valid: { peerId: 'p', seq: 1, expiresAt: 2, roles: ['server'], models: [{ name: 'tiny', policyVersion: 0 }], addresses: [] },
  },
];

const frameChunks = (payload: fc.Arbitrary<Uint8Array>) =>
  fc.tuple(payload, fc.array(fc.nat(), { maxLength: 4 })).map(([frame, cuts]) => {
    const at = [...new Set(cuts.map((c) => c % (frame.length + 1)))].sort((a, b) => a - b);
    const chunks: Uint8Array[] = [];
    let from = 0;
    for (const cut of at) {
      chunks.push(frame.subarray(from, cut));
      from = cut;
    }
    chunks.push(frame.subarray(from));
    return chunks;
  });

function wireTargets(): Target<Uint8Array[]>[] {
  return WIRE_SCHEMAS.map(({ name, schema, valid }) => ({
    name: `p2p:${name}`,
    allowed: ['InvalidFrameError', 'FrameTooLargeError'],
    decode: (chunks: Uint8Array[]) => decodeFrames(chunks, schema),
    input: frameChunks(
      fc.oneof(
        { arbitrary: fc.constant(valid).map((v) => encodeJsonFrame(v)), weight: 1 },
        { arbitrary: mutated(fc.constant(valid)).map((v) => concat(header(bytes(toJsonText(v)).length), bytes(toJsonText(v)))), weight: 3 },
        { arbitrary: fc.uint8Array({ maxLength: 64 }), weight: 1 },
        { arbitrary: fc.tuple(fc.integer({ min: 0, max: 2 ** 32 - 1 }), fc.uint8Array({ maxLength: 32 })).map(([n, rest]) => concat(header(n), rest)), weight: 1 },
        { arbitrary: weirdValue.map((v) => concat(header(bytes(toJsonText(v)).length), bytes(toJsonText(v)))), weight: 1 },
      ),
    ),
  }));
}

function header(n: number): Uint8Array {
  const h = new Uint8Array(4);
  new DataView(h.buffer).setUint32(0, n >>> 0, false);
  return h;
}
function concat(...parts: Uint8Array[]): Uint8Array {
  return Uint8Array.from(Buffer.concat(parts));
}

const tinyConfig = {
  architectures: ['LlamaForCausalLM'],
  model_type: 'llama',
  vocab_size: 264,
  hidden_size: 128,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 32,
  intermediate_size: 384,
  max_position_embeddings: 1024,
  rope_theta: 10000,
  rope_scaling: null,
  rms_norm_eps: 0.000001,
  tie_word_embeddings: true,
  hidden_act: 'silu',
};
const peftConfig = { peft_type: 'LORA', r: 8, lora_alpha: 16, target_modules: ['q_proj', 'v_proj'], lora_dropout: 0 };

/** A small valid file whose header is rewritten by the fuzz (with a right or wrong length prefix). */
const smallTensors = { 'model.norm.weight': { shape: [4], data: new Float32Array([1, 2, 3, 4]) }, 'lm_head.weight': { shape: [2, 2], data: new Float32Array(4) } };
const validSafetensors = serializeSafetensors(smallTensors);
const validHeader = JSON.parse(new TextDecoder().decode(validSafetensors.subarray(8, 8 + new DataView(validSafetensors.buffer, validSafetensors.byteOffset).getUint32(0, true)))) as unknown;
const dataSection = validSafetensors.subarray(8 + new DataView(validSafetensors.buffer, validSafetensors.byteOffset).getUint32(0, true));

const safetensorsInput: fc.Arbitrary<Uint8Array> = fc.oneof(
  { arbitrary: fc.uint8Array({ maxLength: 64 }), weight: 1 },
  {
    arbitrary: fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })).map(([at, byte]) => {
      const copy = Uint8Array.from(validSafetensors);
      copy[at % copy.length] = byte;
      return copy;
    }),
    weight: 2,
  },
  {
    arbitrary: fc.tuple(mutated(fc.constant(validHeader)), fc.integer({ min: -16, max: 16 }), fc.nat({ max: 2 ** 32 - 1 }), fc.boolean()).map(([h, skew, hi, wrongHigh]) => {
      const text = bytes(toJsonText(h));
      const prefix = new Uint8Array(8);
      const view = new DataView(prefix.buffer);
      view.setUint32(0, Math.max(0, text.length + (skew % 3 === 0 ? skew : 0)), true);
      view.setUint32(4, wrongHigh ? hi : 0, true);
      return concat(prefix, text, dataSection);
    }),
    weight: 4,
  },
  { arbitrary: fc.nat({ max: validSafetensors.length }).map((n) => validSafetensors.subarray(0, n)), weight: 1 },
);

const jsonl: fc.Arbitrary<string> = fc
  .array(
    fc.oneof(
      mutated(fc.record({ id: fc.oneof(fc.string({ minLength: 1, maxLength: 6 }), fc.integer()), question: fc.string({ maxLength: 10 }), split: fc.constantFrom('train', 'eval', 'EVAL') })).map(toJsonText),
      weirdValue.map(toJsonText),
      unicodeString,
      fc.constantFrom('', '   ', '\r', '{"id":1}\r', '{"id":"__proto__"}', '{"id":"constructor"}', '{"id":1}{"id":2}'),
    ),
    { maxLength: 5 },
  )
  .chain((lines) => fc.constantFrom('\n', '\r\n', '\r').map((sep) => lines.join(sep)));

/** One list holds targets of every input type; each decodes only what its own arbitrary made. */
function erase<T>(target: Target<T>): Target<unknown> {
  return target as unknown as Target<unknown>;
}

/** Builds the targets; the signed-manifest one needs a key first. */
async function targets(): Promise<Target<unknown>[]> {
  const key = await generateKeyPair('Ed25519');
  const signer = peerIdFromPrivateKey(key).toString();
  const manifest = await buildManifest({ model: 'tiny', version: 1, source: { bytes: validSafetensors } });
  const signed = await signManifest(manifest, key, signer);
  const token = createSwarmToken({ name: 'fuzz' });
  const violations = new ViolationTracker({ disconnect: async () => {} });
  const scratch = mkdtempSync(join(tmpdir(), 'agentjet-fuzz-files-'));
  let fileIndex = 0;
  const list: Target<unknown>[] = [
    ...wireTargets().map(erase),
    erase({
      // The whole server side of a request/stream protocol (json-stream.ts), fed the bytes a remote peer sent: it
      // must answer with data and an end frame, or an error frame carrying one of the protocol's names.
      name: 'p2p:serve-episode-rpc',
      allowed: SERVE_ERRORS,
      decode: async (chunks: Uint8Array[]) => {
        const stream = memoryStream();
        for (const chunk of chunks) stream.deliver(chunk);
        stream.end();
        const served = Object.assign(stream, { addEventListener: () => {}, removeEventListener: () => {} }) as unknown as Stream;
        await serveJsonStream(served, { remotePeer: peerIdFromPrivateKey(key) } as unknown as Connection, {
          version: 1,
          maxRequestBytes: FUZZ_MAX_FRAME_BYTES,
          maxResponseFrameBytes: FUZZ_MAX_FRAME_BYTES,
          readTimeoutMs: SERVE_READ_TIMEOUT_MS,
          requestSchema: EpisodeRpc,
          violations,
          handler: async (request, emit) => emit({ ok: true, type: request.type }),
        });
        const answer = decodeFrames(stream.sent, ResponseFrame);
        const last = answer.at(-1) as z.infer<typeof ResponseFrame> | undefined;
        if (!last) throw Object.assign(new Error('the server sent nothing back'), { name: 'NoAnswer' });
        if (last.t === 'error') throw Object.assign(new Error(last.message), { name: last.name });
        return answer;
      },
      input: frameChunks(
        fc.oneof(
          mutated(fc.constant({ v: 1, body: { type: 'abort', episodeId: 'ep-1', reason: 'r' } })).map((v) => concat(header(bytes(toJsonText(v)).length), bytes(toJsonText(v)))),
          fc.constant(encodeJsonFrame({ v: 1, body: { type: 'begin', request: { model: 'tiny' } } })),
          fc.uint8Array({ maxLength: 64 }),
        ),
      ),
    }),
    erase({
      name: 'p2p:swarm-token',
      allowed: ['InvalidSwarmTokenError'],
      decode: (t: string) => parseSwarmToken(t),
      input: fc.oneof(
        unicodeString,
        fc.nat().map((n) => token.slice(0, n % (token.length + 1))),
        mutated(fc.constant(JSON.parse(Buffer.from(token.slice(5), 'base64url').toString('utf8')) as unknown)).map((v) => `ajs1.${Buffer.from(toJsonText(v)).toString('base64url')}`),
      ),
    }),
    erase({
      name: 'p2p:signed-manifest',
      allowed: ['InvalidManifestError', 'ManifestSignatureError'],
      decode: async (v: { signed: unknown } | { resign: string }) => {
        if ('signed' in v) return verifyManifest(v.signed);
        const signature = Buffer.from(await key.sign(bytes(MANIFEST_SIGNING_DOMAIN + v.resign))).toString('base64');
        return verifyManifest({ manifest: v.resign, signer, signature });
      },
      input: fc.oneof(
        mutated(fc.constant(signed)).map((v) => ({ signed: JSON.parse(toJsonText(v)) as unknown })),
        // Signed by the real key: what a buggy or hostile peer with a valid identity can send.
        mutated(fc.constant(JSON.parse(signed.manifest) as unknown)).map((m) => ({ resign: toJsonText(m) })),
      ),
    }),
    erase({
      name: 'worker:safetensors',
      allowed: ['SafetensorsFormatError'],
      decode: (b: Uint8Array) => parseSafetensors(b),
      input: safetensorsInput,
    }),
    erase({
      name: 'worker:config.json',
      allowed: ['ModelConfigError'],
      decode: (v: unknown) => parseDecoderConfig(v),
      input: fc.oneof({ arbitrary: mutated(fc.constant(tinyConfig)), weight: 5 }, { arbitrary: weirdValue, weight: 1 }).map((v) => JSON.parse(toJsonText(v)) as unknown),
    }),
    erase({
      name: 'worker:adapter_config.json',
      allowed: ['ModelConfigError'],
      decode: (v: unknown) => parsePeftAdapterConfig(v),
      input: fc.oneof({ arbitrary: mutated(fc.constant(peftConfig)), weight: 5 }, { arbitrary: weirdValue, weight: 1 }).map((v) => JSON.parse(toJsonText(v)) as unknown),
    }),
    erase({
      name: 'worker:model-folder',
      allowed: ['ModelFolderError', 'ModelConfigError', 'SafetensorsFormatError', 'MissingTensorError', 'TensorShapeError'],
      share: DISK_CASE_SHARE,
      decode: async ([config, weights]: [string, Uint8Array]) => {
        const dir = join(scratch, `model-${fileIndex++}`);
        mkdirSync(dir);
        writeFileSync(join(dir, 'config.json'), config);
        writeFileSync(join(dir, 'model.safetensors'), weights);
        try {
          return await readModelFolder(dir);
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      },
      input: fc.tuple(
        fc.oneof(mutated(fc.constant(tinyConfig)).map(toJsonText), fc.constant(JSON.stringify(tinyConfig)), unicodeString),
        safetensorsInput,
      ),
    }),
    erase({
      name: 'runner:tasks.jsonl',
      allowed: ['TaskSourceError'],
      decode: (text: string) => parseJsonl(text),
      input: jsonl,
    }),
    erase({
      name: 'runner:task-file',
      allowed: ['TaskSourceError'],
      share: DISK_CASE_SHARE,
      decode: async (text: string) => {
        const path = join(scratch, `tasks-${fileIndex++}.jsonl`);
        writeFileSync(path, text);
        try {
          const pass = await openTaskSource({ path });
          const out: unknown[] = [];
          for await (const task of pass()) out.push(task);
          return out;
        } finally {
          rmSync(path, { force: true });
        }
      },
      input: jsonl,
    }),
    erase({
      name: 'runner:inline-tasks',
      allowed: ['TaskSourceError'],
      decode: async (tasks: unknown) => {
        const pass = await openTaskSource({ inline: tasks as never });
        const out: unknown[] = [];
        for await (const task of pass()) out.push(task);
        return out;
      },
      // An array, as the attach schema guarantees before tasks reach openTaskSource; its elements are fuzzed.
      input: mutated(fc.constant([{ id: 1, q: 'a' }, { id: 'two' }])).map((v) => {
        const tasks = JSON.parse(toJsonText(v)) as unknown;
        return Array.isArray(tasks) ? tasks : [tasks];
      }),
    }),
  ];
  cleanup = () => rmSync(scratch, { recursive: true, force: true });
  return list;
}
let cleanup = () => {};

/** Runs `casesPerTarget` inputs through every decoder (disk-backed ones get their share), seeded. */
/** Runs one decoder over `runs` seeded inputs; findings (at most MAX_FINDINGS_KEPT) go to `findings`. */
export async function fuzzTarget<T>(target: Target<T>, seed: number, runs: number, findings: Finding[]): Promise<TargetFigures> {
  const inputs = fc.sample(target.input, { seed, numRuns: runs });
  const t: TargetFigures = { cases: 0, accepted: 0, rejected: 0, unexpected: 0 };
  for (const input of inputs) {
    t.cases++;
    try {
      await target.decode(input);
      t.accepted++;
    } catch (err) {
      const name = err instanceof Error ? err.name : typeof err;
      if (target.allowed.includes(name)) t.rejected++;
      else {
        t.unexpected++;
        if (t.unexpected <= MAX_FINDINGS_KEPT) {
          findings.push({ target: target.name, input: preview(input), error: err instanceof Error ? `${err.name}: ${err.message.slice(0, 200)}` : String(err) });
        }
      }
    }
  }
  return t;
}

export async function runDecoderFuzz(options: { seed: number; casesPerTarget: number; only?: (name: string) => boolean }): Promise<DecoderFigures> {
  const figures: DecoderFigures = { seed: options.seed, cases: 0, unexpected_errors: 0, targets: {}, findings: [] };
  const list = (await targets()).filter((t) => options.only?.(t.name) ?? true);
  try {
    for (const [i, target] of list.entries()) {
      const runs = Math.max(1, Math.round(options.casesPerTarget * (target.share ?? 1)));
      const t = await fuzzTarget(target, options.seed + i, runs, figures.findings);
      figures.targets[target.name] = t;
      figures.cases += t.cases;
      figures.unexpected_errors += t.unexpected;
    }
  } finally {
    cleanup();
  }
  return figures;
}
