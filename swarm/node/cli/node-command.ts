/** `agentjet node`: runs the peer runtime headless until SIGINT/SIGTERM. */
import { resolve } from 'node:path';
import { PeerRuntime, DEFAULT_PORT, DEFAULT_HOST } from '../runtime.ts';
import { PortInUseError } from '../http/server.ts';
import { defaultDataDir } from '../paths.ts';
import { parsePort, UsageError, type Command } from './command.ts';
import type { LogLevel } from '../log.ts';

const logLevels = ['debug', 'info', 'warn', 'error', 'silent'] as const;

export const nodeCommand: Command = {
  name: 'node',
  summary: 'run the peer runtime headless (control API, gateway and UI on one local port)',
  usage: `agentjet node [options]

Options:
  --port N          port for the UI, control API and gateway (default ${DEFAULT_PORT}; 0 = any free port)
  --host ADDR       address to listen on (default ${DEFAULT_HOST})
  --data-dir DIR    where the store, identity and checkpoints live (default: ${defaultDataDir()})
  --log-level L     console log level: ${logLevels.join(', ')} (default info)
  --json            print one JSON line {"event":"ready",…} when ready (for scripts and tests)`,
  options: {
    port: { type: 'string' },
    host: { type: 'string' },
    'data-dir': { type: 'string' },
    'log-level': { type: 'string' },
    json: { type: 'boolean' },
  },
  async run(values) {
    const port = parsePort(values.port as string | undefined, DEFAULT_PORT);
    const logLevel = (values['log-level'] as string | undefined) ?? 'info';
    if (!(logLevels as readonly string[]).includes(logLevel)) {
      throw new UsageError(`--log-level must be one of ${logLevels.join(', ')}, got "${logLevel}"`);
    }
    const dataDir = values['data-dir'] ? resolve(values['data-dir'] as string) : defaultDataDir();
    let runtime: PeerRuntime;
    try {
      runtime = await PeerRuntime.start({
        dataDir,
        port,
        host: (values.host as string | undefined) ?? DEFAULT_HOST,
        consoleLogLevel: logLevel as LogLevel | 'silent',
      });
    } catch (err) {
      if (err instanceof PortInUseError) {
        process.stderr.write(`agentjet: ${err.message}\n`);
        return 1;
      }
      throw err;
    }
    printReady(runtime, values.json === true);
    await waitForSignal();
    await runtime.stop();
    return 0;
  },
};

function printReady(runtime: PeerRuntime, json: boolean) {
  if (json) {
    const ready = {
      event: 'ready',
      port: runtime.port,
      apiUrl: runtime.urls.api,
      gatewayUrl: runtime.urls.gateway,
      uiUrl: runtime.urls.ui,
      token: runtime.token,
      dataDir: runtime.paths.dataDir,
      nodeId: runtime.identity.nodeId,
    };
    process.stdout.write(JSON.stringify(ready) + '\n');
    return;
  }
  process.stdout.write(
    [
      `AgentJet peer ${runtime.identity.nodeId} is running (data: ${runtime.paths.dataDir})`,
      `  UI:          ${runtime.urls.ui}`,
      `  control API: ${runtime.urls.api}   (Authorization: Bearer ${runtime.token})`,
      `  gateway:     ${runtime.urls.gateway}`,
      'Press Ctrl+C to stop.',
      '',
    ].join('\n'),
  );
}

function waitForSignal(): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      process.off('SIGINT', done);
      process.off('SIGTERM', done);
      resolve();
    };
    process.on('SIGINT', done);
    process.on('SIGTERM', done);
  });
}
