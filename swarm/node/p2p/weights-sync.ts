/**
 * Weights across the swarm. A server peer publishes each hosted model's weights once a training step has made a
 * new policy version live (the model leaves 'updating', or an asynchronous step sets it): the full weights, or only
 * the LoRA adapter (the delta over a frozen base) when LoRA is on, as a self-describing safetensors blob
 * (weights-blob.ts: an adapter names its config and the fingerprint of its base). Peers that mirror the model fetch
 * the blob (signature and sha256 verified by p2p), keep it under `<dataDir>/p2p/weights/<model>/`, and list what
 * they hold (GET /api/p2p/weights).
 *
 * A mirror that hosts the same model and does not train it itself (a serving replica) also loads each newer
 * version that fits its model: full weights as they are; an adapter into its LoRA engine when that has the same
 * LoRA config, or merged (W + scale·B·A) into the base weights of an engine without LoRA. What does not fit —
 * shapes, an older version, another base — is refused with a code before the engine is touched, so the replica
 * keeps serving what it served. A synchronous model drains before the swap, like a training step; an asynchronous
 * one (episodes may span versions) swaps in place: calls under way finish on the old weights, the next get the new.
 */
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { SignedManifest, SwarmNode, WeightsManifest } from '../../../p2p/index.ts';
import type { NamedTensors } from '../../../worker/common/engine.ts';
import type { Logger } from '../log.ts';
import type { HostedModel, ModelHost } from '../models/model-host.ts';
import {
  baseFingerprint,
  checkAdapterFits,
  checkFullFits,
  decodeWeightsBlob,
  encodeWeightsBlob,
  mergeAdapter,
  sameLora,
  WeightsRefusedError,
} from './weights-blob.ts';
import type { BlobKind, BlobMeta, DecodedBlob, WeightsRefusal } from './weights-blob.ts';

export type { RefusalCode, WeightsRefusal } from './weights-blob.ts';

/** Versions kept served per model: the newest, and the one before for peers still fetching it. */
const SERVED_VERSIONS = 2;
/**
 * Fetched blobs kept on disk per model: the newest and the one before. A replica loads a blob once, when it is
 * fetched; older ones only fill the disk of a mirror that runs for days.
 */
const KEPT_BLOBS = 2;
/** Published and fetched entries listed per model (GET /api/p2p/weights): the recent history, bounded. */
const LISTED_ENTRIES = 32;
/** Hex digits of a blob's sha256 in its file name: enough to tell apart the blobs of one version. */
const BLOB_NAME_HASH_CHARS = 16;

export interface FetchedWeights {
  model: string;
  version: number;
  sha256: string;
  bytes: number;
  path: string;
  from: string;
  fetchedAt: string;
  /** Whether the local replica of the model now serves this version. */
  loaded: boolean;
  /** Why the local model did not load it (absent when it did, or when this peer only keeps the blob). */
  refused?: WeightsRefusal;
  /** The blob file was deleted: only the newest fetches of a model are kept on disk. */
  pruned?: boolean;
}

export interface PublishedWeights {
  model: string;
  version: number;
  sha256: string;
  bytes: number;
  kind: BlobKind;
}

export interface WeightsSyncInit {
  node: SwarmNode;
  models: ModelHost;
  /** `<dataDir>/p2p`. */
  dir: string;
  /** Model names to mirror; '*' = all. */
  mirror: string[];
  /** Whether this peer trains the model itself (then fetched versions are kept, never loaded over its own). */
  trainsLocally: (model: string) => boolean;
  /** Whether the model trains asynchronously (episodes may span versions): a replica then swaps without draining. */
  asynchronous?: (model: string) => boolean;
  log: Logger;
}

/** The base weights an engine without LoRA had before adapters were merged into it, for the next adapter. */
interface MergedBase {
  fingerprint: string;
  /** The weights adapters replaced, as they were: every other weight of the engine still is its base. */
  tensors: NamedTensors;
}

/** What a replica puts into its engine for a blob, and what it keeps once that succeeded. */
interface PreparedLoad {
  tensors: NamedTensors;
  /** The merge base to keep after the swap; null drops it (full weights replace the base). */
  base: MergedBase | null | undefined;
}

export class WeightsSync {
  readonly published: PublishedWeights[] = [];
  readonly fetched: FetchedWeights[] = [];
  private readonly listeners = new Set<(entry: FetchedWeights | PublishedWeights) => void>();
  private readonly unsubscribe: (() => void)[] = [];
  private publishing = Promise.resolve();
  /** One load at a time, so a version is checked against the one served after every earlier load finished. */
  private loading: Promise<unknown> = Promise.resolve();
  private readonly mergedBases = new Map<string, MergedBase>();
  /** By model name: the version last loaded from a peer (not trained here, so not published here). */
  private readonly loadedVersions = new Map<string, number>();
  /** sha256 of the blobs being fetched now: an announcement heard twice is fetched once. */
  private readonly inFlight = new Set<string>();
  /** By model name: the fingerprint of its source weights (a LoRA engine's frozen base), read once. */
  private readonly sourceFingerprints = new Map<string, Promise<string | null>>();

  constructor(private readonly init: WeightsSyncInit) {
    for (const model of init.models.models) {
      let lastPublished = model.policyVersion;
      const maybePublish = () => {
        const state = model.state;
        if (state === 'updating' || state === 'loading' || state === 'failed' || model.policyVersion <= lastPublished) return;
        lastPublished = model.policyVersion;
        // A version this replica loaded is its publisher's to announce: signed here, it would be a second blob of it.
        if (this.loadedVersions.get(model.name) === model.policyVersion) return;
        // One publish at a time: serializing weights is heavy, and versions must go out in order.
        this.publishing = this.publishing
          .then(() => this.publish(model).then(() => undefined))
          .catch((err: unknown) => init.log.warn('could not publish weights', { model: model.name, error: String(err) }));
      };
      // Synchronous steps go live as the model leaves 'updating'; asynchronous ones never enter it.
      this.unsubscribe.push(model.onStateChange(maybePublish), model.onPolicyChange(maybePublish));
    }
    this.unsubscribe.push(
      init.node.weights.onManifest(
        ({ manifest, signed, provider }) => void this.maybeFetch(manifest, signed, provider),
      ),
    );
  }

  /** Hears every publish here and every verified fetch (tests, status). */
  onChange(listener: (entry: FetchedWeights | PublishedWeights) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Publish the model's live weights as its current policy version (LoRA: the adapter, named after its base). */
  async publish(model: HostedModel): Promise<PublishedWeights> {
    const lora = model.engine.info.lora;
    // With LoRA the engine's weights are the adapter in PEFT naming, the tensors `engine.save` writes.
    const tensors = await model.engine.getWeights();
    // Read after the weights, not before: an asynchronous run's next step may have gone in first, and the engine
    // answers in order, so its version now is the one these weights are.
    const version = model.engine.info.policyVersion;
    const already = this.published.find((p) => p.model === model.name && p.version === version);
    if (already) return already;
    const meta: BlobMeta = { kind: lora ? 'lora-adapter' : 'full', model: model.name, version };
    if (lora) {
      meta.lora = lora;
      const base = await this.sourceFingerprint(model);
      if (base) meta.base = base;
    }
    const signed = await this.init.node.weights.publish({ model: model.name, version, source: { bytes: encodeWeightsBlob(tensors, meta) } });
    const manifest = JSON.parse(signed.manifest) as WeightsManifest;
    const entry: PublishedWeights = { model: model.name, version, sha256: manifest.sha256, bytes: manifest.totalBytes, kind: meta.kind };
    this.published.push(entry);
    const mine = this.published.filter((p) => p.model === model.name);
    for (const old of mine.slice(0, -SERVED_VERSIONS)) this.init.node.weights.unserve(old.model, old.version);
    dropOldest(this.published, model.name, LISTED_ENTRIES);
    this.init.log.info('weights published', { ...entry });
    this.emit(entry);
    return entry;
  }

  /**
   * The fingerprint of the weights the model's source holds: a LoRA engine's base never changes, so it is read once.
   * The loader is imported here, not above: it brings tfjs onto this thread, which only LoRA runs need.
   */
  private sourceFingerprint(model: HostedModel): Promise<string | null> {
    let fingerprint = this.sourceFingerprints.get(model.name);
    if (!fingerprint) {
      fingerprint = import('../../../worker/node/load-model.ts')
        .then(({ readSourceWeights }) => readSourceWeights(model.source))
        .then(({ config, weights }) => baseFingerprint(config, weights));
      // A failed read is tried again next time.
      fingerprint.catch(() => this.sourceFingerprints.delete(model.name));
      this.sourceFingerprints.set(model.name, fingerprint);
    }
    return fingerprint;
  }

  private wants(model: string): boolean {
    return this.init.mirror.includes('*') || this.init.mirror.includes(model);
  }

  private async maybeFetch(manifest: WeightsManifest, signed: SignedManifest, provider: string): Promise<void> {
    if (!this.wants(manifest.model)) return;
    // Another blob of a version already loaded is not needed; one refused (a peer's bad copy) does not hide the rest.
    if (this.fetched.some((f) => f.sha256 === manifest.sha256 || (f.model === manifest.model && f.version === manifest.version && f.loaded))) return;
    if (this.inFlight.has(manifest.sha256)) return;
    this.inFlight.add(manifest.sha256);
    try {
      await this.fetchAndLoad(manifest, signed, provider);
    } finally {
      this.inFlight.delete(manifest.sha256);
    }
  }

  private async fetchAndLoad(manifest: WeightsManifest, signed: SignedManifest, provider: string): Promise<void> {
    const dir = join(this.init.dir, 'weights', safeName(manifest.model));
    mkdirSync(dir, { recursive: true });
    // Named by content too: two blobs of one version (from two peers) never overwrite each other.
    const destPath = join(dir, `v${manifest.version}-${manifest.sha256.slice(0, BLOB_NAME_HASH_CHARS)}.safetensors`);
    let entry: FetchedWeights;
    try {
      // Only the publisher may sign its model's weights: a relayed copy must carry the same signature.
      const result = await this.init.node.weights.fetch(signed, {
        providers: [provider],
        destPath,
        expectedSigner: provider,
      });
      entry = {
        model: manifest.model,
        version: manifest.version,
        sha256: result.manifest.sha256,
        bytes: result.manifest.totalBytes,
        path: result.path,
        from: provider,
        fetchedAt: new Date().toISOString(),
        loaded: false,
      };
    } catch (err) {
      this.init.log.warn('weights fetch failed', {
        model: manifest.model,
        version: manifest.version,
        from: provider,
        error: `${(err as Error).name}: ${(err as Error).message}`,
      });
      return;
    }
    this.init.log.info('weights fetched and verified', { model: entry.model, version: entry.version, bytes: entry.bytes, from: provider });
    const load = this.loading.then(() => this.loadIntoReplica(entry));
    this.loading = load.catch(() => undefined);
    try {
      entry.loaded = await load;
    } catch (err) {
      entry.refused =
        err instanceof WeightsRefusedError
          ? { code: err.code, reason: err.message }
          : { code: 'engine_refused', reason: `${(err as Error).name}: ${(err as Error).message}` };
      // Training here or an older copy heard again is routine; a blob that does not fit is worth a warning.
      const routine = entry.refused.code === 'trains_locally' || entry.refused.code === 'older_version';
      this.init.log[routine ? 'info' : 'warn']('fetched weights refused', { model: entry.model, version: entry.version, ...entry.refused });
    }
    this.fetched.push(entry);
    this.pruneFetched(entry.model);
    this.emit(entry);
  }

  /**
   * Bounds what a long-running mirror keeps of a model: the blobs of the newest KEPT_BLOBS fetches stay on disk
   * (older files are deleted, their entries say `pruned`), and the newest LISTED_ENTRIES entries are listed.
   */
  private pruneFetched(model: string): void {
    const mine = this.fetched.filter((f) => f.model === model);
    for (const old of mine.slice(0, -KEPT_BLOBS)) {
      if (old.pruned) continue;
      rmSync(old.path, { force: true });
      old.pruned = true;
    }
    dropOldest(this.fetched, model, LISTED_ENTRIES);
  }

  /**
   * Loads a fetched version into the local model of that name, when this peer serves but does not train it. True
   * once it serves it; false when no model of that name is hosted here (the blob is only kept). Throws
   * WeightsRefusedError, before the engine is touched, for what does not fit.
   */
  private async loadIntoReplica(entry: FetchedWeights): Promise<boolean> {
    const model = this.init.models.find(entry.model);
    if (!model) return false;
    if (model.state === 'failed' || model.state === 'loading') throw new WeightsRefusedError('model_not_ready', `the local model is ${model.state}`);
    if (this.init.trainsLocally(model.name)) throw new WeightsRefusedError('trains_locally', 'this peer trains the model itself; the version is kept, not loaded');
    if (entry.version <= model.policyVersion) {
      throw new WeightsRefusedError('older_version', `version ${entry.version} is not newer than version ${model.policyVersion}, which this replica serves`);
    }
    const blob = decodeWeightsBlob(readFileSync(entry.path));
    if (blob.meta && (blob.meta.model !== entry.model || blob.meta.version !== entry.version)) {
      throw new WeightsRefusedError('version_mismatch', `the blob holds ${blob.meta.model} version ${blob.meta.version}, its manifest ${entry.model} version ${entry.version}`);
    }
    const prepared = await this.prepare(model, blob);
    const asynchronous = this.init.asynchronous?.(model.name) ?? false;
    // Synchronous training: no episode may see two policies, so the replica drains before the swap. Asynchronous:
    // episodes span versions anyway; the engine lets running generations finish before the weights change.
    if (!asynchronous) {
      await model.drain();
      model.setState('updating');
    }
    try {
      await model.engine.setWeights(prepared.tensors, entry.version);
      await model.syncSampler(entry.version);
      // Before setPolicy: its listeners (the publisher above) must already know the version came from a peer.
      this.loadedVersions.set(model.name, entry.version);
      model.setPolicy(entry.version, model.step);
    } catch (err) {
      // setWeights checks every tensor before it changes any.
      throw new WeightsRefusedError('engine_refused', `${(err as Error).name}: ${(err as Error).message}`);
    } finally {
      if (!asynchronous) model.resume();
    }
    if (prepared.base) this.mergedBases.set(model.name, prepared.base);
    else if (prepared.base === null) this.mergedBases.delete(model.name);
    this.init.log.info('fetched weights loaded', { model: model.name, version: entry.version, kind: blob.kind, swap: asynchronous ? 'in place' : 'drained' });
    return true;
  }

  /** Checks the blob against the model and returns the tensors for its engine; WeightsRefusedError when it does not fit. */
  private async prepare(model: HostedModel, blob: DecodedBlob): Promise<PreparedLoad> {
    const { config, lora: engineLora } = model.engine.info;
    if (blob.kind === 'full') {
      if (engineLora) throw new WeightsRefusedError('kind_mismatch', 'full weights for a LoRA engine, which holds a frozen base and takes adapters only');
      checkFullFits(config, blob.tensors);
      return { tensors: blob.tensors, base: null };
    }
    const lora = blob.meta?.lora;
    const trainedOn = blob.meta?.base;
    if (!lora || !trainedOn) throw new WeightsRefusedError('lora_base_mismatch', 'the adapter names no LoRA config or no base it was trained on');
    if (engineLora) {
      if (!sameLora(engineLora, lora)) {
        throw new WeightsRefusedError('lora_config_mismatch', `the adapter is rank ${lora.rank}, alpha ${lora.alpha} over ${lora.targetModules.join(', ')}; this engine's LoRA is rank ${engineLora.rank}, alpha ${engineLora.alpha} over ${engineLora.targetModules.join(', ')}`);
      }
      checkAdapterFits(config, lora, blob.tensors);
      if ((await this.sourceFingerprint(model)) !== trainedOn) throw new WeightsRefusedError('lora_base_mismatch', "the adapter was trained on another base than this engine's");
      return { tensors: blob.tensors, base: undefined };
    }
    // An engine without LoRA: the adapter is merged into the base it was trained on, which these weights must be.
    const pairs = checkAdapterFits(config, lora, blob.tensors);
    let current: NamedTensors | undefined;
    let base = this.mergedBases.get(model.name);
    if (!base) {
      current = await model.engine.getWeights();
      base = { fingerprint: baseFingerprint(config, current) ?? '', tensors: {} };
    }
    if (base.fingerprint !== trainedOn) throw new WeightsRefusedError('lora_base_mismatch', 'the adapter was trained on other weights than those this replica serves');
    const tensors: NamedTensors = {};
    const kept: NamedTensors = { ...base.tensors };
    for (const pair of pairs) {
      const weight = kept[pair.base] ?? (current ??= await model.engine.getWeights())[pair.base];
      kept[pair.base] = weight;
      tensors[pair.base] = mergeAdapter(weight, pair, lora);
    }
    // A weight an earlier adapter changed and this one does not adapt goes back to its base.
    for (const [name, weight] of Object.entries(kept)) tensors[name] ??= weight;
    return { tensors, base: { fingerprint: base.fingerprint, tensors: kept } };
  }

  private emit(entry: FetchedWeights | PublishedWeights): void {
    for (const listener of this.listeners) listener(entry);
  }

  close(): void {
    for (const off of this.unsubscribe.splice(0)) off();
  }
}

/** Removes the model's oldest entries from `list` (in place) so that at most `keep` of them are left. */
function dropOldest<T extends { model: string }>(list: T[], model: string, keep: number): void {
  let excess = list.filter((e) => e.model === model).length - keep;
  for (let i = 0; i < list.length && excess > 0; ) {
    if (list[i].model === model) {
      list.splice(i, 1);
      excess--;
    } else i++;
  }
}

/** Model names may hold slashes (Hugging Face ids); keep them one folder deep. */
function safeName(name: string): string {
  return name.replace(/[^A-Za-z0-9._-]/g, '_');
}
