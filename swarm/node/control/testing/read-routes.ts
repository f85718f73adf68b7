/**
 * The episode and UI read routes of a store over real HTTP, for the tests of both: behind `token`, with a model
 * host that hosts nothing (every export falls back to byte spellings, as for a model no longer hosted).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Database } from 'better-sqlite3';
import { loadTokenizer } from '../../../../worker/node/load-tokenizer.ts';
import { addEpisodeControlRoutes } from '../../episodes/control-routes.ts';
import { createHttpServer, listen } from '../../http/server.ts';
import { createLogger } from '../../log.ts';
import { ModelHost } from '../../models/model-host.ts';
import { startWorkerEngine } from '../../models/start-engine.ts';
import { ControlRouter } from '../routes.ts';
import { addUiRoutes } from '../ui-routes.ts';

export interface ReadRoutesServer {
  /** `http://127.0.0.1:PORT/api` */
  base: string;
  close(): Promise<void>;
}

export async function serveReadRoutes(db: Database, token: string): Promise<ReadRoutesServer> {
  const uiRoot = mkdtempSync(join(tmpdir(), 'agentjet-ui-root-'));
  const models = new ModelHost({ startEngine: startWorkerEngine, loadTokenizer });
  const control = new ControlRouter(token);
  addEpisodeControlRoutes(control, db, models);
  addUiRoutes(control, db, models);
  const server: Server = createHttpServer({
    mounts: () => [{ prefix: '/api', router: control, errorShape: 'api' }],
    uiRoot,
    log: createLogger({ consoleLevel: 'silent' }),
  });
  const base = `http://127.0.0.1:${await listen(server, 0, '127.0.0.1')}/api`;
  return {
    base,
    async close() {
      await new Promise((resolve) => server.close(resolve));
      rmSync(uiRoot, { recursive: true, force: true });
    },
  };
}
