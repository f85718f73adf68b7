/**
 * Tells two peers of a private swarm that their swarm keys differ. pnet XORs every byte with the key's stream, so
 * peers with different keys get past its nonce exchange and then read garbage; libp2p's upgrader fails on it without
 * a word, and a peer given a wrong key would stay out silently. Right after pnet, each side writes a fixed check text
 * through the protected stream and reads the other's: the same text back means the same key; anything else is a
 * key mismatch, reported on both sides (each reads the other's garbage) and the connection closed.
 *
 * The check is part of the handshake: a peer without it (an older version) cannot connect to one with it.
 */
import type { AbortOptions, ConnectionProtector, MessageStream } from '@libp2p/interface';
import { byteStream } from '@libp2p/utils';
import { PNET_HANDSHAKE_TIMEOUT_MS } from './constants.ts';

/** Written and expected right after pnet's nonces; versioned, so that a later check can tell itself apart. */
const KEY_CHECK = new TextEncoder().encode('agentjet swarm key check 1\n');

export class SwarmKeyMismatchError extends Error {
  override name = 'SwarmKeyMismatchError';
}

export interface SwarmKeyMismatch {
  /** inbound: a peer dialled this one with another key; outbound: this one dialled a peer of another key. */
  direction: 'inbound' | 'outbound';
  remoteAddress: string;
}

type ProtectorFactory = (components: never) => ConnectionProtector;

function same(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** Wraps pnet's protector (`preSharedKey(...)`) with the key check. */
export function withSwarmKeyCheck(pnet: ProtectorFactory, onMismatch: (mismatch: SwarmKeyMismatch) => void): ProtectorFactory {
  return (components: never) => {
    const inner = pnet(components);
    return {
      async protect(connection: MessageStream, options?: AbortOptions): Promise<MessageStream> {
        const protectedStream = await inner.protect(connection, options);
        const signal = options?.signal ?? AbortSignal.timeout(PNET_HANDSHAKE_TIMEOUT_MS);
        const bytes = byteStream(protectedStream);
        const [theirs] = await Promise.all([bytes.read({ bytes: KEY_CHECK.length, signal }), bytes.write(KEY_CHECK, { signal })]);
        if (!same(theirs.subarray(), KEY_CHECK)) {
          const { direction, remoteAddr } = connection as MessageStream & { remoteAddr?: { toString(): string } };
          onMismatch({ direction: direction === 'inbound' ? 'inbound' : 'outbound', remoteAddress: remoteAddr?.toString() ?? 'unknown' });
          throw new SwarmKeyMismatchError('the other peer holds another swarm key');
        }
        return bytes.unwrap();
      },
    };
  };
}
