/**
 * What an attach checks beyond its request's shape, so that it fails at once and says why instead of failing
 * episode after episode: that every model it names is hosted somewhere, and that a name clash is a deliberate
 * swap and not a second script replacing the first.
 */
import { basename, dirname } from 'node:path';
import { SINGLE_MODEL_ROLE, type AttachClientOptions } from '../../common/runner-api.ts';
import type { Logger } from '../log.ts';
import { closestName } from '../../common/closest-name.ts';
import type { EpisodeApi } from './episode-api.ts';
import { ModelNotHostedError, ScriptSwapRefusedError } from './errors.ts';

/** The origin of a script restored from a store that did not keep where it came from: nothing to compare. */
export const UNKNOWN_ORIGIN = 'unknown:';
const UPLOAD_PREFIX = 'upload:';

/**
 * Every model the script names (each team role's) must answer by its name or a host alias. The runner knows
 * models only through the episode API's status (in a swarm: every peer's). A status that cannot be read blocks
 * nothing: back-pressure makes the script wait for a server that is away, and it resumes when it is back.
 */
export async function checkModelsHosted(api: EpisodeApi, options: AttachClientOptions, log?: Logger): Promise<void> {
  let models: { name: string; aliases: string[] }[];
  try {
    ({ models } = await api.status(options.name));
  } catch (err) {
    log?.warn('could not check that the models are hosted; attaching anyway', { name: options.name, error: `${(err as Error).name}: ${(err as Error).message}` });
    return;
  }
  const hosted = models.flatMap((m) => [m.name, ...m.aliases]);
  for (const [role, model] of Object.entries(options.models ?? { [SINGLE_MODEL_ROLE]: options.model! })) {
    if (hosted.includes(model)) continue;
    const guess = closestName(model, hosted);
    const whose = role === SINGLE_MODEL_ROLE ? '' : ` (role ${role})`;
    throw new ModelNotHostedError(
      `no peer hosts the model "${model}"${whose}${guess ? ` (did you mean "${guess}"?)` : ''}; the swarm serves: ${hosted.join(', ') || 'no models'}`,
    );
  }
}

/**
 * Two scripts from different folders under one name are two scripts, not two versions (every example is
 * `agent.*`): refused unless the request says `swap`. Uploads have no folder; their file names are compared.
 */
export function checkSameOrigin(name: string, attached: string, next: string): void {
  if (attached === UNKNOWN_ORIGIN || sameOrigin(attached, next)) return;
  throw new ScriptSwapRefusedError(
    `"${name}" is already attached from ${describe(attached)}; this script comes from ${describe(next)}. ` +
      'Give it another name (--name), or replace it on purpose with --swap',
  );
}

function sameOrigin(a: string, b: string): boolean {
  const uploaded = (o: string) => o.startsWith(UPLOAD_PREFIX);
  if (!uploaded(a) && !uploaded(b)) return dirname(a) === dirname(b);
  // An upload (or an upload against a file) can only be compared by file name.
  const fileName = (o: string) => (uploaded(o) ? o.slice(UPLOAD_PREFIX.length) : basename(o));
  return fileName(a) === fileName(b);
}

function describe(origin: string): string {
  return origin.startsWith(UPLOAD_PREFIX) ? `the upload ${origin.slice(UPLOAD_PREFIX.length)}` : dirname(origin);
}
