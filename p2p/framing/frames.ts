/**
 * Length-prefixed frames: a 4-byte big-endian length, then that many bytes. Used by every agentjet protocol.
 * Pure byte logic (no streams) so that it can be tested on plain buffers.
 */
import { Uint8ArrayList } from 'uint8arraylist';
import type { z } from 'zod';
import { FrameTooLargeError, InvalidFrameError } from './errors.ts';

/** Bytes of the length prefix. */
export const FRAME_HEADER_BYTES = 4;

export function encodeFrameHeader(payloadBytes: number): Uint8Array {
  const header = new Uint8Array(FRAME_HEADER_BYTES);
  new DataView(header.buffer).setUint32(0, payloadBytes, false);
  return header;
}

/** Header and payload in one buffer (tests and small frames). */
export function encodeFrame(payload: Uint8Array): Uint8Array {
  const frame = new Uint8Array(FRAME_HEADER_BYTES + payload.byteLength);
  frame.set(encodeFrameHeader(payload.byteLength), 0);
  frame.set(payload, FRAME_HEADER_BYTES);
  return frame;
}

export function encodeJsonFrame(value: unknown): Uint8Array {
  return encodeFrame(new TextEncoder().encode(JSON.stringify(value)));
}

/**
 * Accumulates received bytes and cuts them into frames. Rejects a frame as soon as its header announces more
 * than `maxFrameBytes`, before buffering the body.
 */
export class FrameDecoder {
  private readonly buffer = new Uint8ArrayList();

  constructor(private readonly maxFrameBytes: number) {}

  push(chunk: Uint8Array): void {
    this.buffer.append(chunk);
  }

  /** The next complete frame, or undefined when more bytes are needed. */
  next(): Uint8Array | undefined {
    if (this.buffer.byteLength < FRAME_HEADER_BYTES) return undefined;
    const length = this.buffer.getUint32(0, false);
    if (length > this.maxFrameBytes) {
      throw new FrameTooLargeError(`frame of ${length} bytes exceeds the limit of ${this.maxFrameBytes}`);
    }
    if (this.buffer.byteLength < FRAME_HEADER_BYTES + length) return undefined;
    const frame = this.buffer.subarray(FRAME_HEADER_BYTES, FRAME_HEADER_BYTES + length);
    this.buffer.consume(FRAME_HEADER_BYTES + length);
    return frame;
  }

  /** Bytes received that do not yet form a frame (non-zero at end of stream means a truncated frame). */
  get pendingBytes(): number {
    return this.buffer.byteLength;
  }
}

/** Decode a frame as JSON and validate it; anything else is an InvalidFrameError. */
export function decodeJsonFrame<T>(frame: Uint8Array, schema: z.ZodType<T>): T {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(frame));
  } catch {
    throw new InvalidFrameError('frame is not UTF-8 JSON');
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new InvalidFrameError(`frame does not match the schema: ${parsed.error.issues[0]?.message ?? ''}`);
  return parsed.data;
}
