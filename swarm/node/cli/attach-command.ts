/** `agentjet attach SCRIPT --tasks FILE --model M …`: attaches an agent script to the running peer (hot swap when the name exists). */
import { readFileSync } from 'node:fs';
import { basename, dirname, extname, resolve } from 'node:path';
import type { AttachClientRequest, ClientStatus, DryRunResult } from '../../common/runner-api.ts';
import { NODE_SCRIPT_EXTENSIONS } from '../../common/script-extensions.ts';
import { parsePositiveInt, UsageError, type Command } from './command.ts';
import { formatDryRun } from './dry-run-output.ts';
import { dataDirOption, dataDirUsage, PeerClient } from './peer-client.ts';

export const attachCommand: Command = {
  name: 'attach',
  summary: 'attach an agent script (JS, TS or Python) with its tasks to the running peer',
  usage: `agentjet attach SCRIPT --tasks FILE (--model M | --team role=model,role=model) [options]

  Runs SCRIPT once per episode with OPENAI_BASE_URL, OPENAI_API_KEY, AGENTJET_MODEL and AGENTJET_TASK set,
  and reads its last stdout line {"reward": n}. Attaching again under the same name swaps the script live.

Options:
  --tasks FILE        tasks: JSONL ({"id", …} per line; "split":"eval" = held out) or a generator module
  --model M           the model to train
  --team R=M,R=M      a team: one model per role (proposer=m1,verifier=m2)
  --alias NAME        a model name the script hard-codes (repeatable), e.g. gpt-4o-mini
  --name NAME         the client's name (default: the script's file name; for agent.* its folder's name)
  --reward FILE       a module computing the reward from the task and the script's output
  --repeat N          episodes per task (GRPO group size, default 1)
  --concurrency N     episodes of this script at once (default 4)
  --weight W          share of episodes among attached scripts (default 1)
  --epochs N          passes over the tasks (default: until detached)
  --time-limit S      seconds per episode before the process tree is killed (default 600)
  --retries N         re-runs of a failed task (default 1, at most 10)
  --max-failures N    consecutive failed runs that pause the script (circuit breaker, default 5)
  --idle-timeout S    an episode with no LLM call for S seconds is aborted by the server
  --output-idle S     a script that prints nothing for S seconds is killed (default 0 = never)
  --network on|none   none: no network at all, not even the gateway (needs bubblewrap; default on)
  --runtime R         auto, node or python (default auto, by extension)
  --swap              replace a client of that name whose script comes from another folder (or file name)
  --dry-run           run one episode of the first train task, print its calls, result and output; attach nothing
  --abort-in-flight   when swapping, abort the old version's running episodes instead of letting them finish
  --no-sandbox        run Node scripts without Node's permission model
  --bundle            Node scripts: bundle the script and its packages into one module at attach (faster episode
                      start; breaks packages that load files beside their code or native addons)
  --upload            send the script and tasks' content instead of their paths
${dataDirUsage}
  --json              print the client's status as JSON`,
  options: {
    ...dataDirOption,
    tasks: { type: 'string' },
    model: { type: 'string' },
    team: { type: 'string' },
    alias: { type: 'string', multiple: true },
    name: { type: 'string' },
    reward: { type: 'string' },
    repeat: { type: 'string' },
    concurrency: { type: 'string' },
    weight: { type: 'string' },
    epochs: { type: 'string' },
    'time-limit': { type: 'string' },
    retries: { type: 'string' },
    'max-failures': { type: 'string' },
    'idle-timeout': { type: 'string' },
    'output-idle': { type: 'string' },
    network: { type: 'string' },
    runtime: { type: 'string' },
    'abort-in-flight': { type: 'boolean' },
    swap: { type: 'boolean' },
    'dry-run': { type: 'boolean' },
    'no-sandbox': { type: 'boolean' },
    bundle: { type: 'boolean' },
    upload: { type: 'boolean' },
    json: { type: 'boolean' },
  },
  positionals: { min: 1, max: 1, names: 'SCRIPT (the agent script to attach)' },
  async run(values, [scriptArg]) {
    const request = attachRequest(values, scriptArg);
    if (request.dryRun) return dryRun(PeerClient.fromDataDir(values), request, values.json === true);
    const status = await PeerClient.fromDataDir(values).request<ClientStatus>('POST', '/clients', request);
    if (values.json) process.stdout.write(JSON.stringify(status, null, 2) + '\n');
    else {
      process.stdout.write(
        `attached ${status.name} v${status.version} (${status.runtime}, sha256 ${status.scriptHash.slice(0, 12)}) → ${Object.values(status.models).join(', ')}; ` +
          `weight ${status.weight}, concurrency ${status.concurrency}, repeat ${status.repeat}\n`,
      );
    }
    return 0;
  },
};

export function attachRequest(values: Record<string, unknown>, scriptArg: string): AttachClientRequest {
  const tasks = values.tasks as string | undefined;
  if (!tasks) throw new UsageError('--tasks FILE is required');
  const model = values.model as string | undefined;
  const team = values.team as string | undefined;
  if (!model === !team) throw new UsageError('give --model M, or --team role=model,role=model for a team');
  const script = resolve(scriptArg);
  const number = (flag: string, { zero = false } = {}) => {
    const v = values[flag] as string | undefined;
    if (v === undefined) return undefined;
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || n < 0 || (n === 0 && !zero)) throw new UsageError(`--${flag} must be a ${zero ? 'non-negative' : 'positive'} number, got "${v}"`);
    return n;
  };
  const network = values.network as string | undefined;
  if (network !== undefined && network !== 'on' && network !== 'none') throw new UsageError(`--network must be on or none, got "${network}"`);
  const retries = values.retries as string | undefined;
  if (retries !== undefined && !/^(10|[0-9])$/.test(retries)) throw new UsageError(`--retries must be a whole number from 0 to 10, got "${retries}"`);
  const runtime = values.runtime as string | undefined;
  if (runtime !== undefined && !['auto', 'node', 'python'].includes(runtime)) throw new UsageError(`--runtime must be auto, node or python, got "${runtime}"`);
  const upload = values.upload === true;
  if (upload && NODE_SCRIPT_EXTENSIONS.includes(extname(tasks))) throw new UsageError('--upload takes a JSONL task file, not a generator module');
  return {
    name: (values.name as string | undefined) ?? defaultClientName(script),
    script: upload ? { content: readOrUsage(script), filename: basename(script) } : { path: script },
    tasks: upload ? { inline: readOrUsage(resolve(tasks)).split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l) as { id: string }) } : { path: resolve(tasks) },
    ...(model ? { model } : { models: parseTeam(team!) }),
    aliases: (values.alias as string[] | undefined) ?? [],
    ...(values.reward ? { rewardModule: resolve(values.reward as string) } : {}),
    ...(values.repeat !== undefined ? { repeat: parsePositiveInt('--repeat', values.repeat as string, 1) } : {}),
    ...(values.concurrency !== undefined ? { concurrency: parsePositiveInt('--concurrency', values.concurrency as string, 4) } : {}),
    ...(values.weight !== undefined ? { weight: number('weight') } : {}),
    ...(values.epochs !== undefined ? { epochs: parsePositiveInt('--epochs', values.epochs as string, 1) } : {}),
    ...(values['time-limit'] !== undefined ? { timeLimitS: number('time-limit') } : {}),
    ...(retries !== undefined ? { retries: Number(retries) } : {}),
    ...(values['max-failures'] !== undefined ? { maxConsecutiveFailures: parsePositiveInt('--max-failures', values['max-failures'] as string, 5) } : {}),
    ...(values['idle-timeout'] !== undefined ? { idleTimeoutS: number('idle-timeout') } : {}),
    ...(values['output-idle'] !== undefined ? { outputIdleS: number('output-idle', { zero: true }) } : {}),
    ...(network ? { network: network as 'on' | 'none' } : {}),
    ...(runtime ? { runtime: runtime as 'auto' | 'node' | 'python' } : {}),
    inFlight: values['abort-in-flight'] ? 'abort' : 'finish',
    ...(values.swap === true ? { swap: true } : {}),
    ...(values['dry-run'] === true ? { dryRun: true } : {}),
    ...(values.bundle === true ? { bundle: true } : {}),
    sandbox: values['no-sandbox'] !== true,
  };
}

/** Every example is `agent.*`: such a script is named after its folder (`examples/calculator/agent.ts` → calculator). */
export function defaultClientName(script: string): string {
  const stem = basename(script).replace(/\.[^.]+$/, '');
  const name = stem === 'agent' && basename(dirname(script)) ? basename(dirname(script)) : stem;
  return name.replace(/[^A-Za-z0-9._-]/g, '-');
}

/** Exit 0 when the episode ended, 1 when it was aborted: a script that fails its dry run is not ready. */
async function dryRun(peer: PeerClient, request: AttachClientRequest, json: boolean): Promise<number> {
  const result = await peer.request<DryRunResult>('POST', '/clients', request);
  process.stdout.write(json ? JSON.stringify(result, null, 2) + '\n' : formatDryRun(result));
  return result.run.status === 'ended' ? 0 : 1;
}

function parseTeam(text: string): Record<string, string> {
  const team: Record<string, string> = {};
  for (const part of text.split(',')) {
    const m = /^([A-Za-z][A-Za-z0-9_]*)=(.+)$/.exec(part.trim());
    if (!m) throw new UsageError(`--team takes role=model pairs separated by commas, got "${part}"`);
    team[m[1]] = m[2];
  }
  if (Object.keys(team).length < 2) throw new UsageError('--team needs at least two roles');
  return team;
}

function readOrUsage(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    throw new UsageError(`cannot read ${path}`);
  }
}
