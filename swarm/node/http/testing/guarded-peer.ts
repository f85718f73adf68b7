/**
 * A child process for process-guard.test.ts: an HTTP server with the process guard installed, whose `/api/stray`
 * route leaves a rejection unhandled and throws from a callback — the bugs that used to end the process. It answers
 * once the guard has logged both, with the guard's count; it prints its port on stdout when it listens.
 */
import '../../../../p2p/polyfill.ts';
import { createLogger } from '../../log.ts';
import { installProcessGuard } from '../process-guard.ts';
import { sendJson } from '../respond.ts';
import { Router } from '../router.ts';
import { createHttpServer, listen } from '../server.ts';

const log = createLogger({ consoleLevel: 'silent' });
const guard = installProcessGuard(log);

const router = new Router().get('/api/stray', async (_req, res) => {
  const logged = Promise.withResolvers<void>();
  let seen = 0;
  const off = log.onEntry((entry) => {
    if (entry.level === 'error' && ++seen === 2) logged.resolve();
  });
  void Promise.reject(new Error('a promise nobody awaits'));
  setImmediate(() => {
    throw new Error('thrown from a callback');
  });
  await logged.promise;
  off();
  sendJson(res, 200, { caught: guard.caught });
});
const server = createHttpServer({ mounts: () => [{ prefix: '/api', router, errorShape: 'api' }], uiRoot: '/nonexistent', log });
const port = await listen(server, 0, '127.0.0.1');
process.stdout.write(JSON.stringify({ port }) + '\n');
