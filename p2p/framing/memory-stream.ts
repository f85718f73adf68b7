/**
 * An in-memory ByteStream for unit tests of framing: the test pushes the bytes "the remote" sends and reads
 * what the code under test sent. Only what FrameStream uses is implemented.
 */
import type { ByteStream } from './frame-stream.ts';

export interface MemoryStream extends ByteStream {
  /** Bytes arriving from the remote. */
  deliver(bytes: Uint8Array): void;
  /** The remote closes its writing side. */
  end(): void;
  readonly sent: Uint8Array[];
  readonly abortedWith: Error | undefined;
  readonly closed: boolean;
}

export function memoryStream(): MemoryStream {
  const inbox: Uint8Array[] = [];
  let ended = false;
  let abortedWith: Error | undefined;
  let closed = false;
  let wake: (() => void) | undefined;
  const sent: Uint8Array[] = [];
  const notify = () => {
    wake?.();
    wake = undefined;
  };
  return {
    sent,
    get abortedWith() {
      return abortedWith;
    },
    get closed() {
      return closed;
    },
    deliver(bytes) {
      inbox.push(bytes);
      notify();
    },
    end() {
      ended = true;
      notify();
    },
    send(data) {
      if (abortedWith) throw abortedWith;
      sent.push(data);
      return true;
    },
    async onDrain() {},
    abort(err) {
      abortedWith ??= err;
      notify();
    },
    async close() {
      closed = true;
    },
    async *[Symbol.asyncIterator]() {
      while (true) {
        if (abortedWith) throw abortedWith;
        const next = inbox.shift();
        if (next) yield next;
        else if (ended) return;
        else await new Promise<void>((resolve) => (wake = resolve));
      }
    },
  };
}
