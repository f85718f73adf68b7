/**
 * Sealed records for the direct weights channel (see direct.ts): each record is `[u32 length][ciphertext][tag]`,
 * AES-256-GCM under a one-time key (OpenSSL, far faster than the JS transport stack). The length header is
 * the associated data, the nonce is the sender's side plus a counter: the key lives for one session, so a
 * nonce is never reused. A record that does not open ends the session with SealedRecordError.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { DecipherGCM } from 'node:crypto';
import { UnexpectedEndOfStreamError } from '../../framing/errors.ts';
import { SealedRecordError } from './errors.ts';

export const RECORD_HEADER_BYTES = 4;
export const RECORD_TAG_BYTES = 16;
export const SESSION_KEY_BYTES = 32;
const CIPHER = 'aes-256-gcm';

/** Which side sealed a record: part of the nonce, so the two directions never share one. */
export type RecordSide = 'fetcher' | 'provider';

export function newSessionKey(): Buffer {
  return randomBytes(SESSION_KEY_BYTES);
}

function nonce(side: RecordSide, counter: bigint): Buffer {
  const bytes = Buffer.alloc(12);
  bytes.writeUInt32BE(side === 'fetcher' ? 1 : 2, 0);
  bytes.writeBigUInt64BE(counter, 4);
  return bytes;
}

/**
 * Cipher input per update call. OpenSSL output buffers of this size come from the allocator's reusable pool;
 * one update over a whole 1 MiB chunk allocates a fresh 1 MiB output each time, and the page faults of those
 * fresh pages cost more than AES-GCM itself (measured: 64 KiB pieces run 2-7x faster than 1 MiB updates).
 */
export const CIPHER_PIECE_BYTES = 64 * 1024;

/** Seals the records one side sends, in order. */
export class RecordSealer {
  private counter = 0n;

  constructor(
    private readonly key: Uint8Array,
    private readonly side: RecordSide,
  ) {}

  /** The record for the concatenation of `parts`, as buffers to write in order (no copy of the plaintext). */
  seal(parts: Uint8Array[]): Buffer[] {
    const plaintextBytes = parts.reduce((sum, part) => sum + part.byteLength, 0);
    const header = Buffer.alloc(RECORD_HEADER_BYTES);
    header.writeUInt32BE(plaintextBytes + RECORD_TAG_BYTES, 0);
    const cipher = createCipheriv(CIPHER, this.key, nonce(this.side, this.counter++));
    cipher.setAAD(header);
    const out = [header];
    for (const part of parts) {
      for (let offset = 0; offset < part.byteLength; offset += CIPHER_PIECE_BYTES) {
        out.push(cipher.update(part.subarray(offset, offset + CIPHER_PIECE_BYTES)));
      }
    }
    const last = cipher.final();
    if (last.byteLength > 0) out.push(last);
    out.push(cipher.getAuthTag());
    return out;
  }
}

/** Opens the records the other side sent, in order. */
export class RecordOpener {
  private counter = 0n;

  constructor(
    private readonly key: Uint8Array,
    private readonly side: RecordSide,
  ) {}

  /** Start opening the next record, whose 4-byte header is `header`. */
  begin(header: Buffer): OpeningRecord {
    const decipher = createDecipheriv(CIPHER, this.key, nonce(this.side, this.counter++));
    decipher.setAAD(header);
    return new OpeningRecord(decipher);
  }
}

/**
 * One record being opened as its ciphertext arrives, piece by piece (no reassembly copy). The plaintext is
 * held back until the tag authenticates the whole record.
 */
export class OpeningRecord {
  private readonly plaintext: Buffer[] = [];

  constructor(private readonly decipher: DecipherGCM) {}

  update(ciphertext: Buffer): void {
    for (let offset = 0; offset < ciphertext.byteLength; offset += CIPHER_PIECE_BYTES) {
      const piece = this.decipher.update(ciphertext.subarray(offset, offset + CIPHER_PIECE_BYTES));
      if (piece.byteLength > 0) this.plaintext.push(piece);
    }
  }

  /** The record's plaintext as pieces in order; SealedRecordError when the tag does not authenticate it. */
  finish(tag: Buffer): Buffer[] {
    this.decipher.setAuthTag(tag);
    let last: Buffer;
    try {
      last = this.decipher.final();
    } catch {
      throw new SealedRecordError('a record failed authentication');
    }
    if (last.byteLength > 0) this.plaintext.push(last);
    return this.plaintext;
  }
}

/**
 * Opens the records of a byte stream pushed to it piece by piece, each record at most `maxPlaintextBytes`, and hands
 * each one's plaintext (pieces in order) to `onRecord` once its tag has authenticated it. Ciphertext is decrypted as
 * it arrives and never reassembled; nothing of a pushed piece is kept, so its buffer may be reused once `push`
 * returns (the direct channel reads its socket into one reused buffer).
 */
export class RecordReader {
  private readonly header = Buffer.alloc(RECORD_HEADER_BYTES);
  private headerFilled = 0;
  private readonly tag = Buffer.alloc(RECORD_TAG_BYTES);
  private tagFilled = 0;
  private record: OpeningRecord | undefined;
  private ciphertextLeft = 0;

  constructor(
    private readonly opener: RecordOpener,
    private readonly maxPlaintextBytes: number,
    private readonly onRecord: (plaintext: Buffer[]) => void,
  ) {}

  /** SealedRecordError for a record that announces too many bytes or does not authenticate. */
  push(piece: Buffer): void {
    let offset = 0;
    while (offset < piece.byteLength) {
      if (!this.record) {
        const taken = piece.copy(this.header, this.headerFilled, offset, offset + RECORD_HEADER_BYTES - this.headerFilled);
        this.headerFilled += taken;
        offset += taken;
        if (this.headerFilled < RECORD_HEADER_BYTES) return;
        const bodyBytes = this.header.readUInt32BE(0);
        if (bodyBytes < RECORD_TAG_BYTES || bodyBytes > this.maxPlaintextBytes + RECORD_TAG_BYTES) {
          throw new SealedRecordError(`a record announced ${bodyBytes} bytes`);
        }
        this.record = this.opener.begin(Buffer.from(this.header));
        this.ciphertextLeft = bodyBytes - RECORD_TAG_BYTES;
        this.tagFilled = 0;
      } else if (this.ciphertextLeft > 0) {
        const end = Math.min(piece.byteLength, offset + this.ciphertextLeft);
        this.record.update(piece.subarray(offset, end));
        this.ciphertextLeft -= end - offset;
        offset = end;
      } else {
        const taken = piece.copy(this.tag, this.tagFilled, offset, offset + RECORD_TAG_BYTES - this.tagFilled);
        this.tagFilled += taken;
        offset += taken;
        if (this.tagFilled < RECORD_TAG_BYTES) return;
        const plaintext = this.record.finish(this.tag);
        this.record = undefined;
        this.headerFilled = 0;
        this.onRecord(plaintext);
      }
    }
  }

  /** The stream ended: UnexpectedEndOfStreamError when it ended inside a record. */
  end(): void {
    if (this.record || this.headerFilled > 0) throw new UnexpectedEndOfStreamError('the direct channel ended inside a record');
  }
}

/** The opened records of a byte source (a socket), as RecordReader opens them, each as its plaintext pieces in order. */
export async function* readRecords(source: AsyncIterable<Buffer>, opener: RecordOpener, maxPlaintextBytes: number): AsyncGenerator<Buffer[]> {
  const opened: Buffer[][] = [];
  const reader = new RecordReader(opener, maxPlaintextBytes, (plaintext) => opened.push(plaintext));
  for await (const piece of source) {
    try {
      reader.push(piece);
    } catch (err) {
      yield* opened.splice(0); // the records before the bad one did open
      throw err;
    }
    yield* opened.splice(0);
  }
  reader.end();
}

/** The first `count` bytes of `pieces` (copied: they are few) and the bytes after them (not copied); undefined when too short. */
export function splitHead(pieces: Buffer[], count: number): { head: Buffer; rest: Buffer[] } | undefined {
  const head = Buffer.alloc(count);
  let filled = 0;
  const rest: Buffer[] = [];
  for (const piece of pieces) {
    if (filled < count) {
      const taken = piece.copy(head, filled, 0, count - filled);
      filled += taken;
      if (taken < piece.byteLength) rest.push(piece.subarray(taken));
    } else rest.push(piece);
  }
  return filled === count ? { head, rest } : undefined;
}
