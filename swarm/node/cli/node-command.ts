/**
 * `agentjet node` and `agentjet serve`: run the peer runtime headless until SIGINT/SIGTERM. `serve` is `node` with
 * at least one hosted model (`--model`, or `models:` in `--config FILE`).
 */
import type { PeerReadyLine } from '../../common/api.ts';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { PeerRuntime, DEFAULT_PORT, DEFAULT_HOST } from '../runtime.ts';
import { DiskFullError } from '../atomic-file.ts';
import { installProcessGuard } from '../http/process-guard.ts';
import { PortInUseError } from '../http/server.ts';
import { defaultDataDir } from '../paths.ts';
import { parsePort, UsageError, type Command, type OptionValues } from './command.ts';
import type { LogLevel } from '../log.ts';
import { ModelSpecError, type HostedModelSpec } from '../models/model-host.ts';
import { resolveModelSpecs, type ModelEntry } from '../models/model-spec.ts';
import { ConfigFileError, readConfigFile, type PeerConfig } from './config-file.ts';
import type { P2pOptions } from '../p2p/settings.ts';
import { TrainingConfigError } from '../training/errors.ts';
import { mergeOverrides, type TrainingConfigOverrides } from '../training/config.ts';
import { runFlags, trainingFlagOptions, trainingFlagsUsage, trainingOverridesFromFlags } from './training-flags.ts';

const logLevels = ['debug', 'info', 'warn', 'error', 'silent'] as const;

/** The environment variable a swarm token may come in (kept out of `ps`, unlike a flag). */
export const SWARM_TOKEN_ENV = 'AGENTJET_SWARM_TOKEN';

const modelOptionsUsage = `  --model M         host a model: builtin:tiny or a Hugging Face model folder (repeatable)
  --alias NAME=M    another name clients may use for model M (repeatable)
  --config FILE     JSON or YAML config (port, host, dataDir, logLevel, models, aliases, training); flags override it`;

const p2pOptionsUsage = `  --swarm-token-file F  join the private swarm whose token is in file F (or set ${SWARM_TOKEN_ENV}; default:
                    the token stored by agentjet swarm join; none = no p2p)
  --swarm-token T   the same, from the command line (every user of this machine can read it there: prefer the above)
  --no-p2p          stay off the swarm even with a stored token
  --listen ADDR     libp2p multiaddr to listen on (repeatable; default TCP and WebSockets, any free port)
  --bootstrap ADDR  peer multiaddr (with /p2p/<id>) to dial at start, beyond the token's (repeatable)
  --mirror MODEL    fetch and keep the weights swarm peers publish for MODEL ('*' = every model; repeatable)`;

export const nodeCommand: Command = {
  name: 'node',
  summary: 'run the peer runtime headless (control API, gateway and UI on one local port)',
  usage: `agentjet node [options]

Options:
  --port N          port for the UI, control API and gateway (default ${DEFAULT_PORT}; 0 = any free port)
  --host ADDR       address to listen on (default ${DEFAULT_HOST})
  --data-dir DIR    where the store, identity and checkpoints live (default: ${defaultDataDir()})
  --log-level L     console log level: ${logLevels.join(', ')} (default info)
  --json            print one JSON line {"event":"ready",…} when ready (for scripts and tests)
${modelOptionsUsage}
${p2pOptionsUsage}

${trainingFlagsUsage}`,
  options: peerOptions(),
  run: (values) => runPeer(values, { requireModels: false }),
};

export const serveCommand: Command = {
  name: 'serve',
  summary: 'host models: the OpenAI-compatible gateway and episodes for agents (the peer with models)',
  usage: `agentjet serve --model <hf-folder|builtin:tiny> [--model …] [options]

Options:
${modelOptionsUsage}
  --port N          port for the UI, control API and gateway (default ${DEFAULT_PORT}; 0 = any free port)
  --host ADDR       address to listen on (default ${DEFAULT_HOST})
  --data-dir DIR    where the store, identity and checkpoints live (default: ${defaultDataDir()})
  --log-level L     console log level: ${logLevels.join(', ')} (default info)
  --json            print one JSON line {"event":"ready",…} when ready (for scripts and tests)
${p2pOptionsUsage}

${trainingFlagsUsage}`,
  options: peerOptions(),
  run: (values) => runPeer(values, { requireModels: true }),
};

function peerOptions(): Command['options'] {
  return {
    port: { type: 'string' },
    host: { type: 'string' },
    'data-dir': { type: 'string' },
    'log-level': { type: 'string' },
    json: { type: 'boolean' },
    model: { type: 'string', multiple: true },
    alias: { type: 'string', multiple: true },
    config: { type: 'string' },
    'swarm-token': { type: 'string' },
    'swarm-token-file': { type: 'string' },
    'no-p2p': { type: 'boolean' },
    listen: { type: 'string', multiple: true },
    bootstrap: { type: 'string', multiple: true },
    mirror: { type: 'string', multiple: true },
    ...trainingFlagOptions,
  };
}

/** The swarm flags; p2p itself stays off unless a token is given or stored (p2p/settings.ts). */
function p2pOptions(values: OptionValues, env: NodeJS.ProcessEnv = process.env): P2pOptions {
  return {
    enabled: values['no-p2p'] === true ? false : undefined,
    swarmToken: swarmTokenOf(values, env),
    listen: values.listen as string[] | undefined,
    bootstrap: values.bootstrap as string[] | undefined,
    mirror: values.mirror as string[] | undefined,
  };
}

/** A token from a file, the environment or the command line (at most one of them); undefined when none is given. */
export function swarmTokenOf(values: OptionValues, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const file = values['swarm-token-file'] as string | undefined;
  const flag = values['swarm-token'] as string | undefined;
  const fromEnv = env[SWARM_TOKEN_ENV]?.trim() || undefined;
  const given = [file !== undefined, flag !== undefined, fromEnv !== undefined].filter(Boolean).length;
  if (given > 1) throw new UsageError(`give the swarm token one way: --swarm-token-file, ${SWARM_TOKEN_ENV} or --swarm-token`);
  if (file === undefined) return flag ?? fromEnv;
  let text: string;
  try {
    text = readFileSync(resolve(file), 'utf8');
  } catch (err) {
    throw new UsageError(`--swarm-token-file ${file}: cannot read it (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  const token = text.trim();
  if (!token) throw new UsageError(`--swarm-token-file ${file} is empty; put the swarm token (ajs1.…) in it`);
  return token;
}

interface PeerSettings {
  port: number;
  host: string;
  dataDir: string;
  logLevel: LogLevel | 'silent';
  models: HostedModelSpec[];
  /** The file's training settings with the flags laid over them, for every model and per model. */
  training: { config: TrainingConfigOverrides; perModel: Record<string, TrainingConfigOverrides>; run: { fresh: boolean; name?: string } };
}

/** Config file first, flags over it; every mistake is a UsageError (exit 2) that names what is wrong. */
function resolveSettings(values: OptionValues): PeerSettings {
  let config: PeerConfig = { baseDir: process.cwd() };
  if (values.config !== undefined) {
    try {
      config = readConfigFile(values.config as string);
    } catch (err) {
      if (err instanceof ConfigFileError) throw new UsageError(err.message);
      throw err;
    }
  }
  const port = values.port !== undefined ? parsePort(values.port as string, DEFAULT_PORT) : (config.port ?? DEFAULT_PORT);
  const logLevel = (values['log-level'] as string | undefined) ?? config.logLevel ?? 'info';
  if (!(logLevels as readonly string[]).includes(logLevel)) {
    throw new UsageError(`--log-level must be one of ${logLevels.join(', ')}, got "${logLevel}"`);
  }
  const dataDir = values['data-dir']
    ? resolve(values['data-dir'] as string)
    : config.dataDir
      ? resolve(config.baseDir, config.dataDir)
      : defaultDataDir();
  const flagModels = (values.model as string[] | undefined) ?? [];
  // Models from flags are relative to the working directory, those from the file to the file's folder.
  const entries: ModelEntry[] = flagModels.length
    ? flagModels.map((source) => ({ source: resolveSource(source, process.cwd()) }))
    : (config.models ?? []).map((entry) => ({ ...entry, source: resolveSource(entry.source, config.baseDir) }));
  const aliases = [...Object.entries(config.aliases ?? {}).map(([name, model]) => `${name}=${model}`), ...((values.alias as string[] | undefined) ?? [])];
  let models: HostedModelSpec[];
  try {
    models = resolveModelSpecs(entries, aliases);
  } catch (err) {
    if (err instanceof ModelSpecError) throw new UsageError(err.message);
    throw err;
  }
  const flags = trainingOverridesFromFlags(values);
  const perModel: Record<string, TrainingConfigOverrides> = {};
  // Per-model settings come with the file's models (flags that name models replace them, and theirs with them).
  if (flagModels.length === 0) {
    (config.models ?? []).forEach((entry, i) => {
      if (entry.training && models[i]) perModel[models[i].name] = mergeOverrides(entry.training, flags);
    });
  }
  const training = { config: mergeOverrides(config.training ?? {}, flags), perModel, run: runFlags(values) };
  return { port, host: (values.host as string | undefined) ?? config.host ?? DEFAULT_HOST, dataDir, logLevel: logLevel as LogLevel | 'silent', models, training };
}

function resolveSource(source: string, baseDir: string): string {
  return source.startsWith('builtin:') ? source : resolve(baseDir, source);
}

async function runPeer(values: OptionValues, { requireModels }: { requireModels: boolean }): Promise<number> {
  const settings = resolveSettings(values);
  if (requireModels && settings.models.length === 0) {
    throw new UsageError('no model to serve: add --model builtin:tiny (or a model folder), or models: in --config FILE');
  }
  let runtime: PeerRuntime;
  try {
    runtime = await PeerRuntime.start({
      dataDir: settings.dataDir,
      port: settings.port,
      host: settings.host,
      consoleLogLevel: settings.logLevel,
      models: settings.models,
      training: settings.training,
      p2p: p2pOptions(values),
    });
  } catch (err) {
    if (err instanceof TrainingConfigError) throw new UsageError(err.message);
    if (err instanceof PortInUseError || err instanceof DiskFullError) {
      process.stderr.write(`agentjet: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
  // From here on no request and no stray promise may end the process: they are logged and the peer goes on.
  const guard = installProcessGuard(runtime.log);
  const failed = runtime.serving.models.models.filter((m) => m.state === 'failed');
  if (failed.length > 0) {
    for (const model of failed) process.stderr.write(`agentjet: model "${model.name}" failed to load: ${model.error}\n`);
    await runtime.stop();
    return 1;
  }
  printReady(runtime, values.json === true);
  await waitForSignal();
  await runtime.stop();
  guard.uninstall();
  return 0;
}

function printReady(runtime: PeerRuntime, json: boolean) {
  const runs = [...runtime.training.loops.values()].flatMap((loop) => {
    const run = loop.currentRun();
    return run ? [{ model: loop.model.name, id: run.id, name: run.name, step: loop.state().runStep }] : [];
  });
  if (json) {
    const ready: PeerReadyLine = {
      event: 'ready',
      port: runtime.port,
      apiUrl: runtime.urls.api,
      gatewayUrl: runtime.urls.gateway,
      uiUrl: runtime.urls.ui,
      token: runtime.token,
      dataDir: runtime.paths.dataDir,
      nodeId: runtime.identity.nodeId,
      models: runtime.serving.models.models.map((m) => ({ name: m.name, aliases: m.aliases, state: m.state })),
      runs,
      p2p: runtime.p2p ? { peerId: runtime.p2p.node.peerId, swarm: runtime.p2p.node.swarmName, addresses: runtime.p2p.node.multiaddrs() } : null,
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
      ...(runtime.p2p ? [`  swarm:       ${runtime.p2p.node.swarmName} as ${runtime.p2p.node.peerId}`] : []),
      ...runtime.serving.models.models.map((m) => `  model:       ${m.name}${m.aliases.length ? ` (aliases: ${m.aliases.join(', ')})` : ''} — ${m.state}, backend ${m.status().backend}`),
      ...runs.map((r) => `  run:         ${r.name} of ${r.model} at step ${r.step} (agentjet runs show ${r.id})`),
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
