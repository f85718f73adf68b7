/**
 * Child process for abandoned-dial.test.ts: a peer gives up a WebSockets dial to a listener that accepts TCP but
 * never answers the upgrade, then the listener cuts the connection. The late failure must not reach the process
 * as an uncaught exception. Prints one JSON line and exits 0 when the peer is still alive afterwards.
 */
import '../polyfill.ts';
import { createServer } from 'node:net';
import type { Socket } from 'node:net';
import { testNodes } from './nodes.ts';

/** Time for the cut to reach the dialler and any error it raises to surface. */
const SETTLE_MS = 500;

// The dial is given up the moment its upgrade request arrives (not after a fixed time, which a loaded machine
// could outrun): the socket is then connected and waiting for an answer that never comes.
const giveUp = new AbortController();
const held: Socket[] = [];
const silent = createServer((socket) => {
  held.push(socket);
  socket.once('data', () => giveUp.abort());
});
await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
const port = (silent.address() as { port: number }).port;

const nodes = testNodes();
const node = await nodes.start();
const dial = node.dial(`/ip4/127.0.0.1/tcp/${port}/ws`, { signal: giveUp.signal });
const dialError = await dial.then(() => 'connected', (error: unknown) => (error as Error).name);

const connectionsHeld = held.length;
for (const socket of held) socket.destroy();
silent.close();
await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
await nodes.cleanup();
process.stdout.write(`${JSON.stringify({ dialError, connectionsHeld })}\n`);
