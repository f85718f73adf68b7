/**
 * @libp2p/websockets dials with the WHATWG `WebSocket` global, which Node 20 lacks (Node 22 has it).
 * The `ws` package implements the same interface; install it when the runtime has none.
 *
 * One difference matters: the transport attaches its 'message' listener a few ticks after 'open', and `ws`
 * delivers a message that arrives in that gap to nobody. Under pnet the listener's nonce arrives exactly
 * then, and the handshake hangs. This subclass holds messages until the first 'message' listener exists.
 */
import { WebSocket as NodeWebSocket } from 'ws';

class HeldMessagesWebSocket extends NodeWebSocket {
  private held: unknown[][] | undefined = [];

  override emit(event: string | symbol, ...args: unknown[]): boolean {
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
