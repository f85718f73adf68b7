/**
 * Token arrays as compact little-endian blobs: int32 token ids, uint8 loss masks, float32 logprobs (the engine
 * computes in float32, so its logprobs survive the round trip exactly). Explicit little-endian through DataView,
 * so a store file reads the same on every machine.
 */

export class BlobFormatError extends Error {
  override name = 'BlobFormatError';
}

export function encodeInt32(values: readonly number[]): Buffer {
  const view = new DataView(new ArrayBuffer(values.length * 4));
  values.forEach((v, i) => view.setInt32(i * 4, v, true));
  return Buffer.from(view.buffer);
}

export function decodeInt32(blob: Uint8Array): number[] {
  const view = viewOf(blob, 4);
  return Array.from({ length: blob.byteLength / 4 }, (_, i) => view.getInt32(i * 4, true));
}

export function encodeFloat32(values: readonly number[]): Buffer {
  const view = new DataView(new ArrayBuffer(values.length * 4));
  values.forEach((v, i) => view.setFloat32(i * 4, v, true));
  return Buffer.from(view.buffer);
}

export function decodeFloat32(blob: Uint8Array): number[] {
  const view = viewOf(blob, 4);
  return Array.from({ length: blob.byteLength / 4 }, (_, i) => view.getFloat32(i * 4, true));
}

export function encodeMask(values: readonly number[]): Buffer {
  return Buffer.from(Uint8Array.from(values));
}

export function decodeMask(blob: Uint8Array): number[] {
  return Array.from(blob);
}

function viewOf(blob: Uint8Array, width: number): DataView {
  if (blob.byteLength % width !== 0)
    throw new BlobFormatError(
      `blob of ${blob.byteLength} bytes is not a whole number of ${width}-byte values`,
    );
  return new DataView(blob.buffer, blob.byteOffset, blob.byteLength);
}
