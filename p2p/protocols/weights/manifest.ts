/**
 * Weights manifests: what a blob is (model, version, size, sha256) and how it is chunked, signed by the peer
 * that publishes it. The signature covers the exact JSON text, so no canonical re-encoding is needed.
 */
import type { PrivateKey } from '@libp2p/interface';
import { peerIdFromString } from '@libp2p/peer-id';
import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';
import { z } from 'zod';
import { readExactly } from './chunk-file.ts';
import {
  DEFAULT_CHUNK_BYTES,
  MANIFEST_SIGNING_DOMAIN,
  MANIFEST_VERSION,
  MAX_CHUNK_BYTES,
  MAX_CHUNKS,
  MAX_SIGNED_MANIFEST_BYTES,
} from './constants.ts';
import { InvalidManifestError, ManifestSignatureError } from './errors.ts';

const Sha256Hex = z.string().regex(/^[0-9a-f]{64}$/);

export const ManifestChunk = z.object({
  index: z.number().int().nonnegative(),
  bytes: z.number().int().positive().max(MAX_CHUNK_BYTES),
  sha256: Sha256Hex,
});

export const WeightsManifest = z.object({
  v: z.literal(MANIFEST_VERSION),
  model: z.string().min(1).max(256),
  version: z.number().int().nonnegative(),
  totalBytes: z.number().int().nonnegative(),
  sha256: Sha256Hex,
  chunkSize: z.number().int().positive().max(MAX_CHUNK_BYTES),
  chunks: z.array(ManifestChunk).max(MAX_CHUNKS),
});
export type WeightsManifest = z.infer<typeof WeightsManifest>;

/** The manifest as it travels: its JSON text, the signer's peer id and an Ed25519 signature (base64). */
export const SignedManifest = z.object({
  manifest: z.string().max(MAX_SIGNED_MANIFEST_BYTES),
  signer: z.string().min(1).max(128),
  signature: z.string().max(1024),
});
export type SignedManifest = z.infer<typeof SignedManifest>;

/** Where the bytes to serve come from. */
export type BlobSource = { bytes: Uint8Array } | { path: string };

function signingBytes(manifestJson: string): Uint8Array {
  return new TextEncoder().encode(MANIFEST_SIGNING_DOMAIN + manifestJson);
}

/** Chunk size for a blob: the default, doubled until the chunk count fits MAX_CHUNKS. */
export function chooseChunkSize(totalBytes: number, requested?: number): number {
  let size = requested ?? DEFAULT_CHUNK_BYTES;
  while (Math.ceil(totalBytes / size) > MAX_CHUNKS && size * 2 <= MAX_CHUNK_BYTES) size *= 2;
  if (size > MAX_CHUNK_BYTES || Math.ceil(totalBytes / size) > MAX_CHUNKS) {
    throw new InvalidManifestError(`cannot chunk ${totalBytes} bytes into at most ${MAX_CHUNKS} chunks`);
  }
  return size;
}

/** Hash a blob chunk by chunk and as a whole (reads a file in chunk-sized pieces, never all at once). */
export async function buildManifest(init: { model: string; version: number; source: BlobSource; chunkSize?: number }): Promise<WeightsManifest> {
  const whole = createHash('sha256');
  const chunks: WeightsManifest['chunks'] = [];
  const addChunk = (bytes: Uint8Array) => {
    whole.update(bytes);
    chunks.push({ index: chunks.length, bytes: bytes.byteLength, sha256: createHash('sha256').update(bytes).digest('hex') });
  };
  let totalBytes: number;
  let chunkSize: number;
  if ('bytes' in init.source) {
    const bytes = init.source.bytes;
    totalBytes = bytes.byteLength;
    chunkSize = chooseChunkSize(totalBytes, init.chunkSize);
    for (let offset = 0; offset < totalBytes; offset += chunkSize) addChunk(bytes.subarray(offset, offset + chunkSize));
  } else {
    const handle = await open(init.source.path, 'r');
    try {
      totalBytes = (await handle.stat()).size;
      chunkSize = chooseChunkSize(totalBytes, init.chunkSize);
      const buffer = new Uint8Array(chunkSize);
      for (let offset = 0; offset < totalBytes; offset += chunkSize) {
        const length = Math.min(chunkSize, totalBytes - offset);
        await readExactly(handle, buffer, length, offset);
        addChunk(buffer.subarray(0, length));
      }
    } finally {
      await handle.close();
    }
  }
  return { v: MANIFEST_VERSION, model: init.model, version: init.version, totalBytes, sha256: whole.digest('hex'), chunkSize, chunks };
}

export async function signManifest(manifest: WeightsManifest, privateKey: PrivateKey, signer: string): Promise<SignedManifest> {
  const json = JSON.stringify(manifest);
  const signature = await privateKey.sign(signingBytes(json));
  return { manifest: json, signer, signature: Buffer.from(signature).toString('base64') };
}

/**
 * Check the signature with the public key inside the signer's peer id, then the manifest's shape and
 * consistency. Anything forged or altered throws ManifestSignatureError; a malformed manifest InvalidManifestError.
 */
export async function verifyManifest(signed: unknown): Promise<{ manifest: WeightsManifest; signed: SignedManifest }> {
  const envelope = SignedManifest.safeParse(signed);
  if (!envelope.success) throw new InvalidManifestError('not a signed manifest');
  const { manifest: json, signer, signature } = envelope.data;
  let publicKey;
  try {
    publicKey = peerIdFromString(signer).publicKey;
  } catch {
    throw new ManifestSignatureError('the signer is not a peer id');
  }
  if (!publicKey) throw new ManifestSignatureError('the signer peer id carries no public key');
  let valid = false;
  try {
    valid = await publicKey.verify(signingBytes(json), Buffer.from(signature, 'base64'));
  } catch {
    valid = false;
  }
  if (!valid) throw new ManifestSignatureError(`the manifest is not signed by ${signer}`);
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    throw new InvalidManifestError('the manifest is not JSON');
  }
  const parsed = WeightsManifest.safeParse(value);
  if (!parsed.success) throw new InvalidManifestError(parsed.error.issues[0]?.message ?? 'invalid manifest');
  checkConsistency(parsed.data);
  return { manifest: parsed.data, signed: envelope.data };
}

function checkConsistency(manifest: WeightsManifest): void {
  const expectedChunks = Math.ceil(manifest.totalBytes / manifest.chunkSize);
  if (manifest.chunks.length !== expectedChunks) throw new InvalidManifestError('chunk count does not match the size');
  manifest.chunks.forEach((chunk, i) => {
    const expectedBytes = Math.min(manifest.chunkSize, manifest.totalBytes - i * manifest.chunkSize);
    if (chunk.index !== i || chunk.bytes !== expectedBytes) throw new InvalidManifestError(`chunk ${i} has the wrong index or size`);
  });
}
