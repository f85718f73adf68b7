/**
 * Chunks and the files they live in: a served chunk read from its blob, a fetched one checked against the signed
 * manifest and written into the partial file. Both the main thread and the direct channel's thread use these.
 */
import { createHash } from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';
import { InvalidManifestError } from './errors.ts';

/** A chunk's bytes as pieces in order, as they came off the wire: hashed and written without reassembly. */
export type ChunkPieces = readonly Uint8Array[];

/** What a chunk must be, from the signed manifest: its size and sha256 (hex). */
export interface ExpectedChunk {
  index: number;
  bytes: number;
  sha256: string;
}

/** Fill `buffer` with `length` bytes of the file from `position`; InvalidManifestError when the file ends first. */
export async function readExactly(handle: FileHandle, buffer: Uint8Array, length: number, position: number): Promise<void> {
  let read = 0;
  while (read < length) {
    const { bytesRead } = await handle.read(buffer, read, length - read, position + read);
    if (bytesRead === 0) throw new InvalidManifestError('the file is shorter than its manifest');
    read += bytesRead;
  }
}

/** Whether the pieces, back to back, are the expected chunk. */
export function isExpectedChunk(pieces: ChunkPieces, expected: ExpectedChunk): boolean {
  let bytes = 0;
  const hash = createHash('sha256');
  for (const piece of pieces) {
    bytes += piece.byteLength;
    hash.update(piece);
  }
  return bytes === expected.bytes && hash.digest('hex') === expected.sha256;
}

/** Write the pieces back to back at `position` (writev may write less than asked: the rest is written again). */
export async function writeAll(handle: FileHandle, pieces: ChunkPieces, position: number): Promise<void> {
  let left = pieces.filter((piece) => piece.byteLength > 0);
  while (left.length > 0) {
    const { bytesWritten } = await handle.writev(left as Uint8Array[], position);
    position += bytesWritten;
    let skip = bytesWritten;
    const rest: Uint8Array[] = [];
    for (const piece of left) {
      if (skip >= piece.byteLength) skip -= piece.byteLength;
      else {
        rest.push(skip > 0 ? piece.subarray(skip) : piece);
        skip = 0;
      }
    }
    left = rest;
  }
}
