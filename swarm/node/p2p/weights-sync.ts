/**
 * Weights across the swarm. A server peer publishes each hosted model's weights once a training step has made a
 * new policy version live (the model leaves 'updating', or an asynchronous step sets it): the full weights as safetensors, or the PEFT adapter
 * when LoRA is on. Peers that mirror the model fetch the blob (signature and sha256 verified by p2p), keep it
 * under `<dataDir>/p2p/weights/<model>/`, and list what they hold (GET /api/p2p/weights).
 *
 * A mirror that hosts the same model and does not train it itself (a serving replica) also loads each newer full
 * version into its engine, between episodes like a training step, so its gateway serves the swarm's newest policy.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { SwarmNode, WeightsManifest } from '../../../p2p/index.ts';
import { parseSafetensors, serializeSafetensors } from '../../../worker/checkpoint/safetensors.ts';
import type { Logger } from '../log.ts';
import type { HostedModel, ModelHost } from '../models/model-host.ts';

/** Versions kept served per model: the newest, and the one before for peers still fetching it. */
const SERVED_VERSIONS = 2;

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
}

export interface PublishedWeights {
  model: string;
  version: number;
  sha256: string;
  bytes: number;
  kind: 'full' | 'lora-adapter';
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
  log: Logger;
}

export class WeightsSync {
  readonly published: PublishedWeights[] = [];
  readonly fetched: FetchedWeights[] = [];
  private readonly listeners = new Set<(entry: FetchedWeights | PublishedWeights) => void>();
  private readonly unsubscribe: (() => void)[] = [];
  private publishing = Promise.resolve();

  constructor(private readonly init: WeightsSyncInit) {
    for (const model of init.models.models) {
      let lastPublished = model.policyVersion;
      const maybePublish = () => {
        const state = model.state;
        if (state === 'updating' || state === 'loading' || state === 'failed' || model.policyVersion <= lastPublished) return;
        lastPublished = model.policyVersion;
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

  /** Publish the model's live weights as its current policy version. */
  async publish(model: HostedModel): Promise<PublishedWeights> {
    const version = model.policyVersion;
    const lora = model.engine.info.lora !== null;
    const bytes = lora
      ? await this.adapterBytes(model, version)
      : serializeSafetensors(await model.engine.getWeights());
    const signed = await this.init.node.weights.publish({
      model: model.name,
      version,
      source: lora ? { path: bytes as string } : { bytes: bytes as Uint8Array },
    });
    const manifest = JSON.parse(signed.manifest) as WeightsManifest;
    const entry: PublishedWeights = {
      model: model.name,
      version,
      sha256: manifest.sha256,
      bytes: manifest.totalBytes,
      kind: lora ? 'lora-adapter' : 'full',
    };
    this.published.push(entry);
    const mine = this.published.filter((p) => p.model === model.name);
    for (const old of mine.slice(0, -SERVED_VERSIONS)) this.init.node.weights.unserve(old.model, old.version);
    this.init.log.info('weights published', { ...entry });
    this.emit(entry);
    return entry;
  }

  /** LoRA: the engine writes its PEFT adapter; the adapter's safetensors file is what peers fetch. */
  private async adapterBytes(model: HostedModel, version: number): Promise<string> {
    const dir = join(this.init.dir, 'outbox', safeName(model.name), `v${version}`);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    await model.engine.save(dir);
    const file = readdirSync(dir).find((name) => name.endsWith('.safetensors'));
    if (!file) throw new Error(`the engine wrote no safetensors adapter into ${dir}`);
    return join(dir, file);
  }

  private wants(model: string): boolean {
    return this.init.mirror.includes('*') || this.init.mirror.includes(model);
  }

  private async maybeFetch(
    manifest: WeightsManifest,
    signed: Parameters<SwarmNode['weights']['fetch']>[0],
    provider: string,
  ): Promise<void> {
    if (!this.wants(manifest.model)) return;
    if (this.fetched.some((f) => f.model === manifest.model && f.version === manifest.version)) return;
    const dir = join(this.init.dir, 'weights', safeName(manifest.model));
    mkdirSync(dir, { recursive: true });
    const destPath = join(dir, `v${manifest.version}.safetensors`);
    try {
      // Only the publisher may sign its model's weights: a relayed copy must carry the same signature.
      const result = await this.init.node.weights.fetch(signed, {
        providers: [provider],
        destPath,
        expectedSigner: provider,
      });
      const entry: FetchedWeights = {
        model: manifest.model,
        version: manifest.version,
        sha256: result.manifest.sha256,
        bytes: result.manifest.totalBytes,
        path: result.path,
        from: provider,
        fetchedAt: new Date().toISOString(),
        loaded: false,
      };
      entry.loaded = await this.loadIntoReplica(entry);
      this.fetched.push(entry);
      this.init.log.info('weights fetched and verified', {
        model: entry.model,
        version: entry.version,
        bytes: entry.bytes,
        from: provider,
      });
      this.emit(entry);
    } catch (err) {
      this.init.log.warn('weights fetch failed', {
        model: manifest.model,
        version: manifest.version,
        from: provider,
        error: `${(err as Error).name}: ${(err as Error).message}`,
      });
    }
  }

  /** Loads a fetched full version into the local model of that name, when this peer serves but does not train it. */
  private async loadIntoReplica(entry: FetchedWeights): Promise<boolean> {
    const model = this.init.models.find(entry.model);
    if (!model || model.state === 'failed' || model.state === 'loading' || this.init.trainsLocally(model.name)) return false;
    if (entry.version <= model.policyVersion) return false;
    const tensors = parseSafetensors(readFileSync(entry.path)).tensors;
    // A LoRA adapter (PEFT names) is kept on disk: the replica's engine takes full weights only.
    if (Object.keys(tensors).some((name) => name.includes('lora_'))) return false;
    // Like a training step: no episode may see two policies, so the replica drains before the swap.
    await model.drain();
    model.setState('updating');
    try {
      await model.engine.setWeights(tensors, entry.version);
      model.setPolicy(entry.version, model.step);
    } finally {
      model.resume();
    }
    this.init.log.info('fetched weights loaded', { model: model.name, version: entry.version });
    return true;
  }

  private emit(entry: FetchedWeights | PublishedWeights): void {
    for (const listener of this.listeners) listener(entry);
  }

  close(): void {
    for (const off of this.unsubscribe.splice(0)) off();
  }
}

/** Model names may hold slashes (Hugging Face ids); keep them one folder deep. */
function safeName(name: string): string {
  return name.replace(/[^A-Za-z0-9._-]/g, '_');
}
