/**
 * @packageDocumentation
 * `/agentjet/weights/1` — signed, chunked, sha256-verified, resumable weight transfer.
 *
 * ```ts
 * const signed = await node.weights.publish({ model: 'tiny', version: 3, source: { path: 'ckpt.safetensors' } })
 * node.weights.onManifest(({ signed, provider }) => node.weights.fetch(signed, { providers: [provider], destPath }))
 * ```
 */
export { WeightsProtocol } from './weights.ts';
export type { WeightsInit, ManifestAnnouncement, FetchWeightsOptions, FetchWeightsResult } from './weights.ts';
export { SignedManifest, WeightsManifest, buildManifest, signManifest, verifyManifest } from './manifest.ts';
export type { BlobSource } from './manifest.ts';
export type { DownloadStats } from './download.ts';
export * from './constants.ts';
export * from './errors.ts';
