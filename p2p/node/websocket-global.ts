/**
 * @libp2p/websockets dials with the WHATWG `WebSocket` global, which Node 20 lacks (Node 22 has it).
 * The `ws` package implements the same interface; install it when the runtime has none.
 *
 * One difference matters: the transport attaches its 'message' listener a few ticks after 'open', and `ws`
 * delivers a message that arrives in that gap to nobody. Under pnet the listener's nonce arrives exactly
 * then, and the handshake hangs. This subclass holds messages until the first 'message' listener exists.
 *
 * Another is fatal: when a dial is aborted (another address won, or it timed out) the transport stops listening
 * but leaves the socket connecting, and `ws` throws an 'error' that has no listener, so a late refusal from an
 * address already given up crashed the peer. An error nobody listens for belongs to such an abandoned dial: it is
 * dropped, and the opening handshake has a time limit so the socket does not linger either.
 */
import { WebSocket as NodeWebSocket } from 'ws';
import type { ClientOptions } from 'ws';

/** How long an opening handshake may take: a dial the transport abandoned is closed by then at the latest. */
const HANDSHAKE_TIMEOUT_MS = 30_000;

class HeldMessagesWebSocket extends NodeWebSocket {
  private held: unknown[][] | undefined = [];

  constructor(address: string | URL, protocols?: string | string[], options?: ClientOptions) {
    super(address, protocols, { handshakeTimeout: HANDSHAKE_TIMEOUT_MS, ...options });
  }

  override emit(event: string | symbol, ...args: unknown[]): boolean {
    if (event === 'error' && this.listenerCount('error') === 0) return false;
    if (event === 'message' && this.held && this.listenerCount('message') === 0) {
      this.held.push(args);
      return true;
    }
    return super.emit(event, ...args);
  }

  override addEventListener(...args: Parameters<NodeWebSocket['addEventListener']>): void {
    super.addEventListener(...args);
    if (args[0] !== 'message' || !this.held) return;
    const held = this.held;
    this.held = undefined;
    for (const message of held) super.emit('message', ...message);
  }
}

const globals = globalThis as { WebSocket?: unknown };
globals.WebSocket ??= HeldMessagesWebSocket;

export {};
