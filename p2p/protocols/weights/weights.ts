/**
 * `/agentjet/weights/1`: versioned weight blobs (checkpoints, LoRA deltas) moved between peers.
 *
 * A publisher hashes its blob into a manifest, signs it with its node key and announces it on the swarm's
 * weights topic. A fetcher verifies the signature before asking anybody for a byte, then pulls chunks from
 * one or more providers (see download.ts for verification, resume and the atomic hand-over).
 */
import type { Connection, Libp2p, PeerId, PrivateKey, Stream } from '@libp2p/interface';
import type { GossipSub, Message } from '@libp2p/gossipsub';
import { TopicValidatorResult } from '@libp2p/gossipsub';
import { open } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { z } from 'zod';
import { FrameStream, sendErrorFrame } from '../../framing/frame-stream.ts';
import { RemoteError, StreamAbortedError, UnexpectedEndOfStreamError } from '../../framing/errors.ts';
import { decodeJsonFrame } from '../../framing/frames.ts';
import { RequestEnvelope, isProtocolViolation } from '../shared/json-stream.ts';
import { InvalidRequestError, UnsupportedVersionError } from '../shared/errors.ts';
import { toPeerId } from '../shared/service.ts';
import type { ViolationTracker } from '../shared/violations.ts';
import {
  MAX_CHUNK_BYTES,
  MAX_SIGNED_MANIFEST_BYTES,
  MAX_WEIGHTS_INBOUND_STREAMS,
  MAX_WEIGHTS_REQUEST_BYTES,
  WEIGHTS_PROTOCOL,
  WEIGHTS_PROTOCOL_VERSION,
  WEIGHTS_READ_TIMEOUT_MS,
  weightsTopic,
} from './constants.ts';
import { downloadBlob } from './download.ts';
import type { ChunkProvider, DownloadStats } from './download.ts';
import { ChunkHashMismatchError, InvalidManifestError, UnknownBlobError } from './errors.ts';
import { buildManifest, readExactly, signManifest, verifyManifest } from './manifest.ts';
import type { BlobSource, WeightsManifest , SignedManifest} from './manifest.ts';
import { WeightsRequest, WeightsResponseFrame } from './wire.ts';

export interface WeightsInit {
  readTimeoutMs?: number;
  maxInboundStreams?: number;
}

export interface WeightsComponents {
  libp2p: Pick<Libp2p, 'handle' | 'unhandle' | 'dialProtocol'>;
  violations: ViolationTracker;
  privateKey: PrivateKey;
  peerId: PeerId;
  pubsub: GossipSub;
  swarmName: string;
}

/** A verified manifest heard on the weights topic, and the peer that offers it. */
export interface ManifestAnnouncement {
  manifest: WeightsManifest;
  signed: SignedManifest;
  provider: string;
}

export interface FetchWeightsOptions {
  /** Peer ids to fetch from, in order of preference; default: every peer that announced this blob. */
  providers?: string[];
  destPath: string;
  signal?: AbortSignal;
  /** Require this signer (e.g. the server peer that trains the model). */
  expectedSigner?: string;
  onChunk?: (index: number, stats: DownloadStats) => void;
}

export interface FetchWeightsResult {
  path: string;
  manifest: WeightsManifest;
  stats: DownloadStats;
}

interface ServedBlob {
  manifest: WeightsManifest;
  signed: SignedManifest;
  source: BlobSource;
}

const blobKey = (model: string, version: number) => `${model}@${version}`;

export class WeightsProtocol {
  readonly topic: string;
  private readonly served = new Map<string, ServedBlob>();
  /** blob sha256 → peers that announced it. */
  private readonly providersBySha = new Map<string, Set<string>>();
  private readonly listeners = new Set<(announcement: ManifestAnnouncement) => void>();
  private readonly readTimeoutMs: number;
  private readonly maxInboundStreams: number;
  private started = false;

  constructor(
    private readonly components: WeightsComponents,
    init: WeightsInit = {},
  ) {
    this.topic = weightsTopic(components.swarmName);
    this.readTimeoutMs = init.readTimeoutMs ?? WEIGHTS_READ_TIMEOUT_MS;
    this.maxInboundStreams = init.maxInboundStreams ?? MAX_WEIGHTS_INBOUND_STREAMS;
  }

  async start(): Promise<void> {
    if (this.started) return;
    await this.components.libp2p.handle(WEIGHTS_PROTOCOL, (stream, connection) => this.serve(stream, connection), {
      maxInboundStreams: this.maxInboundStreams,
    });
    const { pubsub } = this.components;
    pubsub.topicValidators.set(this.topic, this.validateAnnouncement);
    pubsub.addEventListener('message', this.onMessage);
    pubsub.subscribe(this.topic);
    this.started = true;
  }

  async stop(): Promise<void> {
    if (!this.started) return;
    this.started = false;
    const { pubsub } = this.components;
    pubsub.removeEventListener('message', this.onMessage);
    pubsub.topicValidators.delete(this.topic);
    try {
      pubsub.unsubscribe(this.topic);
    } catch {
      // gossipsub may already be stopped with the node.
    }
    await this.components.libp2p.unhandle(WEIGHTS_PROTOCOL);
  }

  /** Hash, sign, serve and (by default) announce a blob of ours. Returns the signed manifest. */
  async publish(init: { model: string; version: number; source: BlobSource; chunkSize?: number; announce?: boolean }): Promise<SignedManifest> {
    const manifest = await buildManifest(init);
    const signed = await signManifest(manifest, this.components.privateKey, this.components.peerId.toString());
    this.served.set(blobKey(manifest.model, manifest.version), { manifest, signed, source: init.source });
    if (init.announce ?? true) await this.announce(signed);
    return signed;
  }

  /**
   * Serve a blob someone else published (e.g. one we fetched), so that fetchers can spread the load.
   * The signature is checked; the bytes are trusted to be what was verified when they were fetched.
   */
  async serveExisting(signed: SignedManifest, source: BlobSource, options: { announce?: boolean } = {}): Promise<void> {
    const { manifest } = await verifyManifest(signed);
    this.served.set(blobKey(manifest.model, manifest.version), { manifest, signed, source });
    if (options.announce ?? true) await this.announce(signed);
  }

  /** Stop serving a version (e.g. an old policy the swarm moved past). */
  unserve(model: string, version: number): void {
    this.served.delete(blobKey(model, version));
  }

  /** Peers that announced the blob with this sha256. */
  providers(sha256: string): string[] {
    return [...(this.providersBySha.get(sha256) ?? [])];
  }

  /** Hear verified manifest announcements; returns the unsubscribe function. */
  onManifest(listener: (announcement: ManifestAnnouncement) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Ask a peer for the manifest it serves for a model version (verified before it is returned). */
  async fetchManifest(peer: string | PeerId, model: string, version: number, options: { signal?: AbortSignal } = {}): Promise<SignedManifest> {
    let result: SignedManifest | undefined;
    await this.exchange(toPeerId(peer), { op: 'manifest', model, version }, options.signal, async (frame) => {
      if (frame.t !== 'manifest') throw new InvalidManifestError('expected a manifest frame');
      result = frame.signed;
    });
    if (!result) throw new UnexpectedEndOfStreamError('no manifest in the response');
    await verifyManifest(result);
    return result;
  }

  /**
   * Download a blob: verify the manifest's signature first (ManifestSignatureError when forged), then fetch,
   * verify and resume as download.ts describes. The file appears at `destPath` only once fully verified.
   */
  async fetch(signedManifest: SignedManifest, options: FetchWeightsOptions): Promise<FetchWeightsResult> {
    const { manifest, signed } = await verifyManifest(signedManifest);
    if (options.expectedSigner && signed.signer !== options.expectedSigner) {
      throw new InvalidManifestError(`signed by ${signed.signer}, expected ${options.expectedSigner}`);
    }
    const providerIds = options.providers ?? this.providers(manifest.sha256);
    const stats = await downloadBlob({
      manifest,
      destPath: options.destPath,
      providers: providerIds.map((id) => this.chunkProvider(toPeerId(id), manifest)),
      signal: options.signal,
      onChunk: options.onChunk,
      onRejected: (providerId) =>
        this.components.violations.record(toPeerId(providerId), new ChunkHashMismatchError('corrupted chunk')),
    });
    return { path: options.destPath, manifest, stats };
  }

  private chunkProvider(peer: PeerId, manifest: WeightsManifest): ChunkProvider {
    return {
      id: peer.toString(),
      fetchChunks: async (indices, onChunk, signal) => {
        const request = { op: 'chunks' as const, model: manifest.model, version: manifest.version, sha256: manifest.sha256, indices };
        await this.exchange(peer, request, signal, async (frame, frames) => {
          if (frame.t !== 'chunk') throw new InvalidManifestError('expected a chunk frame');
          const bytes = await frames.read(signal);
          if (!bytes || bytes.byteLength !== frame.bytes) throw new UnexpectedEndOfStreamError('chunk body missing or of the wrong size');
          await onChunk(frame.index, bytes);
        });
      },
    };
  }

  /** One client exchange: send the request, hand each response frame to `onFrame` until `end`. */
  private async exchange(
    peer: PeerId,
    request: WeightsRequest,
    signal: AbortSignal | undefined,
    onFrame: (frame: WeightsResponseFrame, frames: FrameStream) => Promise<void>,
  ): Promise<void> {
    const stream = await this.components.libp2p.dialProtocol(peer, WEIGHTS_PROTOCOL, { signal });
    const frames = new FrameStream(stream, { maxFrameBytes: MAX_CHUNK_BYTES + MAX_SIGNED_MANIFEST_BYTES, readTimeoutMs: this.readTimeoutMs });
    try {
      await frames.writeJson({ v: WEIGHTS_PROTOCOL_VERSION, body: request }, signal);
      await frames.close(signal);
      while (true) {
        let frame: WeightsResponseFrame;
        try {
          frame = await frames.readJson(WeightsResponseFrame, signal);
        } catch (err) {
          if (isProtocolViolation(err)) this.components.violations.record(peer, err as Error);
          throw err;
        }
        if (frame.t === 'end') return;
        if (frame.t === 'error') throw new RemoteError(frame.name, frame.message);
        await onFrame(frame, frames);
      }
    } catch (err) {
      stream.abort(err instanceof Error ? err : new StreamAbortedError(String(err)));
      throw err;
    }
  }

  /** Serve one inbound stream; never throws. */
  private async serve(stream: Stream, connection: Connection): Promise<void> {
    const frames = new FrameStream(stream, { maxFrameBytes: MAX_WEIGHTS_REQUEST_BYTES, readTimeoutMs: this.readTimeoutMs });
    const cancelled = new AbortController();
    const onClose = () => cancelled.abort(new StreamAbortedError('the client closed the stream'));
    stream.addEventListener('close', onClose);
    try {
      let request: WeightsRequest;
      try {
        const envelope = await frames.readJson(RequestEnvelope);
        if (envelope.v !== WEIGHTS_PROTOCOL_VERSION) throw new UnsupportedVersionError(`version ${envelope.v} is not supported`);
        const parsed = WeightsRequest.safeParse(envelope.body);
        if (!parsed.success) throw new InvalidRequestError(parsed.error.issues[0]?.message ?? 'invalid request');
        request = parsed.data;
      } catch (err) {
        // Answer first: a violation may hang up on the peer, and it should still learn why.
        await sendErrorFrame(frames, err);
        if (isProtocolViolation(err)) this.components.violations.record(connection.remotePeer, err as Error);
        return;
      }
      try {
        const blob = this.served.get(blobKey(request.model, request.version));
        if (!blob || (request.op === 'chunks' && request.sha256 !== blob.manifest.sha256)) {
          throw new UnknownBlobError(`not serving ${request.model}@${request.version}`);
        }
        if (request.op === 'manifest') await frames.writeJson({ t: 'manifest', signed: blob.signed }, cancelled.signal);
        else await this.sendChunks(frames, blob, request.indices, cancelled.signal);
        await frames.writeJson({ t: 'end' }, cancelled.signal);
        await frames.close();
      } catch (err) {
        if (!cancelled.signal.aborted) await sendErrorFrame(frames, err);
      }
    } finally {
      stream.removeEventListener('close', onClose);
    }
  }

  private async sendChunks(frames: FrameStream, blob: ServedBlob, indices: number[], signal: AbortSignal): Promise<void> {
    const { manifest, source } = blob;
    let handle: FileHandle | undefined;
    try {
      if ('path' in source) handle = await open(source.path, 'r');
      for (const index of indices) {
        const chunk = manifest.chunks[index];
        if (!chunk) throw new InvalidRequestError(`no chunk ${index}`);
        const offset = index * manifest.chunkSize;
        let bytes: Uint8Array;
        if ('bytes' in source) bytes = source.bytes.subarray(offset, offset + chunk.bytes);
        else {
          bytes = new Uint8Array(chunk.bytes);
          await readExactly(handle as FileHandle, bytes, chunk.bytes, offset);
        }
        await frames.writeJson({ t: 'chunk', index, bytes: bytes.byteLength }, signal);
        await frames.write(bytes, signal);
      }
    } finally {
      await handle?.close();
    }
  }

  private async announce(signed: SignedManifest): Promise<void> {
    try {
      await this.components.pubsub.publish(this.topic, new TextEncoder().encode(JSON.stringify(signed)));
    } catch {
      // No subscriber yet: fetchers can still ask for the manifest directly.
    }
  }

  private readonly validateAnnouncement = async (source: PeerId, message: Message): Promise<TopicValidatorResult> => {
    if (await this.decodeAnnouncement(message)) return TopicValidatorResult.Accept;
    this.components.violations.record(source, new InvalidManifestError('invalid weights announcement'));
    return TopicValidatorResult.Reject;
  };

  private async decodeAnnouncement(message: Message): Promise<ManifestAnnouncement | undefined> {
    if (message.type !== 'signed' || message.data.byteLength > MAX_SIGNED_MANIFEST_BYTES) return undefined;
    try {
      const signed = decodeJsonFrame(message.data, z.unknown());
      const verified = await verifyManifest(signed);
      return { ...verified, provider: message.from.toString() };
    } catch {
      return undefined;
    }
  }

  private readonly onMessage = (event: CustomEvent<Message>): void => {
    if (event.detail.topic !== this.topic) return;
    void this.decodeAnnouncement(event.detail).then((announcement) => {
      if (!announcement) return;
      const providers = this.providersBySha.get(announcement.manifest.sha256) ?? new Set<string>();
      providers.add(announcement.provider);
      this.providersBySha.set(announcement.manifest.sha256, providers);
      for (const listener of this.listeners) {
        try {
          listener(announcement);
        } catch {
          // A listener's bug must not stop announcements.
        }
      }
    });
  };
}
