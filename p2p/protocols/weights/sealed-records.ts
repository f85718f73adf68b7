/**
 * Sealed records for the direct weights channel (see direct.ts): each record is `[u32 length][ciphertext][tag]`,
 * AES-256-GCM under a one-time key (OpenSSL, far faster than the JS transport stack). The length header is
 * the associated data, the nonce is the sender's side plus a counter: the key lives for one session, so a
 * nonce is never reused. A record that does not open ends the session with SealedRecordError.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
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
    const out = [header, ...parts.map((part) => cipher.update(part)), cipher.final()];
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

  open(header: Buffer, body: Buffer): Buffer {
    const ciphertext = body.subarray(0, body.byteLength - RECORD_TAG_BYTES);
    const decipher = createDecipheriv(CIPHER, this.key, nonce(this.side, this.counter++));
    decipher.setAAD(header);
    decipher.setAuthTag(body.subarray(body.byteLength - RECORD_TAG_BYTES));
    const plaintext = decipher.update(ciphertext);
    try {
      decipher.final();
    } catch {
      throw new SealedRecordError('a record failed authentication');
    }
    return plaintext;
  }
}

/** The opened records of a byte source (a socket), each at most `maxPlaintextBytes`. */
export async function* readRecords(source: AsyncIterable<Buffer>, opener: RecordOpener, maxPlaintextBytes: number): AsyncGenerator<Buffer> {
  const pending: Buffer[] = [];
  let pendingBytes = 0;
  const take = (count: number): Buffer => {
    const whole = pending.length === 1 ? pending[0] : Buffer.concat(pending, pendingBytes);
    pending.length = 0;
    if (whole.byteLength > count) pending.push(whole.subarray(count));
    pendingBytes -= count;
    return whole.subarray(0, count);
  };
  let header: Buffer | undefined;
  let bodyBytes = 0;
  for await (const piece of source) {
    pending.push(piece);
    pendingBytes += piece.byteLength;
    while (true) {
      if (!header) {
        if (pendingBytes < RECORD_HEADER_BYTES) break;
        header = Buffer.from(take(RECORD_HEADER_BYTES));
        bodyBytes = header.readUInt32BE(0);
        if (bodyBytes < RECORD_TAG_BYTES || bodyBytes > maxPlaintextBytes + RECORD_TAG_BYTES) {
          throw new SealedRecordError(`a record announced ${bodyBytes} bytes`);
        }
      }
      if (pendingBytes < bodyBytes) break;
      const record = opener.open(header, take(bodyBytes));
      header = undefined;
      yield record;
    }
  }
  if (header || pendingBytes > 0) throw new UnexpectedEndOfStreamError('the direct channel ended inside a record');
}
