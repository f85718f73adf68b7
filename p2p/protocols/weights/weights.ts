/**
 * `/agentjet/weights/1`: versioned weight blobs (checkpoints, LoRA deltas) moved between peers.
 *
 * A publisher hashes its blob into a manifest, signs it with its node key and announces it on the swarm's
 * weights topic. A fetcher verifies the signature before asking anybody for a byte, then pulls chunks from
 * one or more providers (see download.ts for verification, resume and the atomic hand-over). The chunk
 * bytes travel on a one-time direct channel that the provider offers over this protocol (direct.ts), or on
 * the libp2p stream itself when that channel cannot be set up.
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
  DIRECT_CONNECT_TIMEOUT_MS,
  MAX_CHUNK_BYTES,
  MAX_SIGNED_MANIFEST_BYTES,
  MAX_WEIGHTS_INBOUND_STREAMS,
  MAX_WEIGHTS_REQUEST_BYTES,
  WEIGHTS_PROTOCOL,
  WEIGHTS_PROTOCOL_VERSION,
  WEIGHTS_READ_TIMEOUT_MS,
  weightsTopic,
} from './constants.ts';
import { readExactly } from './chunk-file.ts';
import { downloadBlob } from './download.ts';
import type { ChunkProvider, ChunkTarget, DownloadStats } from './download.ts';
import { DirectOffers, receiveDirect } from './direct.ts';
import type { DirectOffer } from './direct.ts';
import { ChunkHashMismatchError, DirectChannelUnavailableError, DirectThreadError, InvalidManifestError, UnknownBlobError } from './errors.ts';
import { buildManifest, signManifest, verifyManifest } from './manifest.ts';
import type { BlobSource, WeightsManifest, SignedManifest } from './manifest.ts';
import { WeightsRequest, WeightsResponseFrame } from './wire.ts';

export interface WeightsInit {
  readTimeoutMs?: number;
  maxInboundStreams?: number;
  /** Offer fetchers a direct channel for chunk bytes (default true); when false they use the libp2p stream. */
  directTransfer?: boolean;
  /** Address the direct channel listens on; default every interface. */
  directHost?: string;
  directConnectTimeoutMs?: number;
}

export interface WeightsComponents {
  libp2p: Pick<Libp2p, 'handle' | 'unhandle' | 'dialProtocol' | 'getConnections'>;
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
  /** Ask providers for the direct channel (default true); false keeps every byte on the libp2p stream. */
  direct?: boolean;
}

export interface FetchWeightsResult {
  path: string;
  manifest: WeightsManifest;
  stats: DownloadStats;
  /** Verified or not, chunks received per path: the direct channel or the libp2p stream. */
  chunksByPath: { direct: number; libp2p: number };
}

interface ServedBlob {
  manifest: WeightsManifest;
  signed: SignedManifest;
  source: BlobSource;
}

const blobKey = (model: string, version: number) => `${model}@${version}`;

/**
 * A blob served from memory is kept in shared memory, copied there once when it starts being served: the direct
 * channel's thread then seals its chunks straight from it, with no copy per fetch.
 */
function inSharedMemory(source: BlobSource): BlobSource {
  if ('path' in source || source.bytes.buffer instanceof SharedArrayBuffer) return source;
  const shared = new Uint8Array(new SharedArrayBuffer(source.bytes.byteLength));
  shared.set(source.bytes);
  return { bytes: shared };
}

/** The direct channel cannot be had from this provider: it offers none, cannot be reached, predates it, or our thread died. */
function directUnavailable(err: unknown): boolean {
  if (err instanceof DirectChannelUnavailableError || err instanceof DirectThreadError) return true;
  return err instanceof RemoteError && (err.remoteName === 'DirectChannelUnavailableError' || err.remoteName === 'InvalidRequestError');
}

export class WeightsProtocol {
  readonly topic: string;
  private readonly served = new Map<string, ServedBlob>();
  /** blob sha256 → peers that announced it. */
  private readonly providersBySha = new Map<string, Set<string>>();
  private readonly listeners = new Set<(announcement: ManifestAnnouncement) => void>();
  private readonly readTimeoutMs: number;
  private readonly maxInboundStreams: number;
  private readonly directTransfer: boolean;
  private readonly directTimeouts: { connectTimeoutMs: number; idleTimeoutMs: number };
  private readonly directOffers: DirectOffers;
  private started = false;

  constructor(
    private readonly components: WeightsComponents,
    init: WeightsInit = {},
  ) {
    this.topic = weightsTopic(components.swarmName);
    this.readTimeoutMs = init.readTimeoutMs ?? WEIGHTS_READ_TIMEOUT_MS;
    this.maxInboundStreams = init.maxInboundStreams ?? MAX_WEIGHTS_INBOUND_STREAMS;
    this.directTransfer = init.directTransfer ?? true;
    this.directTimeouts = { connectTimeoutMs: init.directConnectTimeoutMs ?? DIRECT_CONNECT_TIMEOUT_MS, idleTimeoutMs: this.readTimeoutMs };
    this.directOffers = new DirectOffers(this.directTimeouts, init.directHost);
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
    this.directOffers.closeAll();
  }

  /** Hash, sign, serve and (by default) announce a blob of ours. Returns the signed manifest. */
  async publish(init: { model: string; version: number; source: BlobSource; chunkSize?: number; announce?: boolean }): Promise<SignedManifest> {
    const manifest = await buildManifest(init);
    const signed = await signManifest(manifest, this.components.privateKey, this.components.peerId.toString());
    this.served.set(blobKey(manifest.model, manifest.version), { manifest, signed, source: inSharedMemory(init.source) });
    if (init.announce ?? true) await this.announce(signed);
    return signed;
  }

  /**
   * Serve a blob someone else published (e.g. one we fetched), so that fetchers can spread the load.
   * The signature is checked; the bytes are trusted to be what was verified when they were fetched.
   */
  async serveExisting(signed: SignedManifest, source: BlobSource, options: { announce?: boolean } = {}): Promise<void> {
    const { manifest } = await verifyManifest(signed);
    this.served.set(blobKey(manifest.model, manifest.version), { manifest, signed, source: inSharedMemory(source) });
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
    const chunksByPath = { direct: 0, libp2p: 0 };
    const stats = await downloadBlob({
      manifest,
      destPath: options.destPath,
      providers: providerIds.map((id) => this.chunkProvider(toPeerId(id), manifest, options.direct ?? true, chunksByPath)),
      signal: options.signal,
      onChunk: options.onChunk,
      onRejected: (providerId) =>
        this.components.violations.record(toPeerId(providerId), new ChunkHashMismatchError('corrupted chunk')),
    });
    return { path: options.destPath, manifest, stats, chunksByPath };
  }

  /**
   * One provider of one fetch. Each batch goes over the direct channel while that works; once the provider
   * offers none or cannot be reached, this fetch uses the libp2p stream for it.
   */
  private chunkProvider(peer: PeerId, manifest: WeightsManifest, direct: boolean, chunksByPath: FetchWeightsResult['chunksByPath']): ChunkProvider {
    let useDirect = direct;
    const blob = { model: manifest.model, version: manifest.version, sha256: manifest.sha256 };
    return {
      id: peer.toString(),
      fetchChunks: async (indices, sink, signal) => {
        let rest = indices;
        if (useDirect) {
          const delivered = new Set<number>();
          try {
            await this.fetchDirect(peer, { op: 'direct', ...blob, indices }, sink.target, signal, (index, matched) => {
              chunksByPath.direct += 1;
              sink.landed(index, matched);
              delivered.add(index);
            });
            return;
          } catch (err) {
            if (!directUnavailable(err)) throw err;
            useDirect = false;
            // A thread that died mid-session delivered some chunks: the stream carries the rest.
            rest = indices.filter((index) => !delivered.has(index));
            if (rest.length === 0) return;
          }
        }
        await this.exchange(peer, { op: 'chunks', ...blob, indices: rest }, signal, async (frame, frames) => {
          if (frame.t !== 'chunk') throw new InvalidManifestError('expected a chunk frame');
          const bytes = await frames.read(signal);
          if (!bytes || bytes.byteLength !== frame.bytes) throw new UnexpectedEndOfStreamError('chunk body missing or of the wrong size');
          chunksByPath.libp2p += 1;
          await sink.deliver(frame.index, [bytes]);
        });
      },
    };
  }

  /** Ask for an offer over the libp2p stream, then receive the chunks on the direct channel (checked and written by its thread). */
  private async fetchDirect(
    peer: PeerId,
    request: Extract<WeightsRequest, { op: 'direct' }>,
    target: ChunkTarget,
    signal: AbortSignal | undefined,
    onChunk: (index: number, matched: boolean) => void,
  ): Promise<void> {
    let offer: DirectOffer | undefined;
    await this.exchange(peer, request, signal, async (frame) => {
      if (frame.t !== 'direct') throw new InvalidManifestError('expected a direct-channel offer');
      offer = { port: frame.port, key: frame.key };
    });
    if (!offer) throw new UnexpectedEndOfStreamError('no direct-channel offer in the response');
    const host = this.hostOf(peer);
    if (!host) throw new DirectChannelUnavailableError('the connection to the provider has no IP address');
    await receiveDirect({ host, offer, ...this.directTimeouts, target, indices: request.indices, signal, onChunk });
  }

  /** The provider's IP address as our libp2p connection to it sees it. */
  private hostOf(peer: PeerId): string | undefined {
    for (const connection of this.components.libp2p.getConnections(peer)) {
      const ip = connection.remoteAddr.getComponents().find((c) => c.name === 'ip4' || c.name === 'ip6');
      if (ip?.value) return ip.value;
    }
    return undefined;
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
        else if (request.op === 'direct') await frames.writeJson({ t: 'direct', ...(await this.offerDirect(blob, request.indices)) }, cancelled.signal);
        else {
          await this.readChunks(blob, request.indices, async (index, bytes) => {
            await frames.writeJson({ t: 'chunk', index, bytes: bytes.byteLength }, cancelled.signal);
            await frames.write(bytes, cancelled.signal);
          });
        }
        await frames.writeJson({ t: 'end' }, cancelled.signal);
        await frames.close();
      } catch (err) {
        if (!cancelled.signal.aborted) await sendErrorFrame(frames, err);
      }
    } finally {
      stream.removeEventListener('close', onClose);
    }
  }

  private async offerDirect(blob: ServedBlob, indices: number[]): Promise<DirectOffer> {
    if (!this.directTransfer) throw new DirectChannelUnavailableError('this peer offers no direct channel');
    const { manifest, source } = blob;
    const chunks = indices.map((index) => {
      const chunk = manifest.chunks[index];
      if (!chunk) throw new InvalidRequestError(`no chunk ${index}`);
      return { index, bytes: chunk.bytes };
    });
    // The thread reads the file itself, or seals straight from the bytes (in shared memory since they were served).
    return this.directOffers.offer('path' in source ? { path: source.path } : { shared: source.bytes }, manifest.chunkSize, chunks);
  }

  /** Read the requested chunks of a served blob in order and hand each to `deliver`; the next read overlaps the delivery. */
  private async readChunks(blob: ServedBlob, indices: number[], deliver: (index: number, bytes: Uint8Array) => Promise<void>): Promise<void> {
    const { manifest, source } = blob;
    for (const index of indices) if (!manifest.chunks[index]) throw new InvalidRequestError(`no chunk ${index}`);
    const handle = 'path' in source ? await open(source.path, 'r') : undefined;
    const read = async (index: number): Promise<Uint8Array> => {
      const chunk = manifest.chunks[index];
      const offset = index * manifest.chunkSize;
      if ('bytes' in source) return source.bytes.subarray(offset, offset + chunk.bytes);
      // Unzeroed: readExactly fills every byte or throws.
      const bytes = Buffer.allocUnsafe(chunk.bytes);
      await readExactly(handle as FileHandle, bytes, chunk.bytes, offset);
      return bytes;
    };
    let next: Promise<Uint8Array> | undefined;
    try {
      next = indices.length > 0 ? read(indices[0]) : undefined;
      for (const [i, index] of indices.entries()) {
        const bytes = await (next as Promise<Uint8Array>);
        next = i + 1 < indices.length ? read(indices[i + 1]) : undefined;
        await deliver(index, bytes);
      }
    } finally {
      // A read still running when delivery failed must finish (and fail quietly) before the file closes.
      await next?.catch(() => undefined);
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
