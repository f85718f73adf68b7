/**
 * `agentjet episodes list [filters] | show ID | export ID | export --all [filters]`: a peer's episodes. With a peer
 * running on the data dir the command asks it (control API); without one it reads the store file read-only
 * (offline-store.ts), so a stopped peer's episodes can still be listed, read and exported.
 */
import { createWriteStream, renameSync, rmSync, type WriteStream } from 'node:fs';
import { once } from 'node:events';
import { Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import type { Database } from 'better-sqlite3';
import { z } from 'zod';
import { EPISODE_SORTS, type EpisodeSort } from '../../common/episode-query.ts';
import {
  episodeKindSchema,
  episodeStateSchema,
  type EpisodeExport,
  type EpisodeKind,
  type EpisodeState,
} from '../../common/timeline/export.ts';
import { exportTokenizer } from '../episodes/control-routes.ts';
import { exportEpisodes } from '../store/episode-export.ts';
import { EPISODE_PAGE_DEFAULT, EPISODE_PAGE_MAX, listEpisodes, type EpisodeFilter, type EpisodePage, type EpisodeSelection } from '../store/episode-list.ts';
import { getEpisodeDetail, getEpisodeExport, type EpisodeDetail } from '../store/episode-reads.ts';
import { EpisodeNotFoundError } from '../store/episode-errors.ts';
import { parsePositiveInt, UsageError, type Command, type OptionValues } from './command.ts';
import { dataDirOf, openOfflineStore, peerOrOffline, type PeerAccess } from './offline-store.ts';
import { dataDirOption, PeerNotRunningError, PeerRequestError } from './peer-client.ts';

/**
 * The newest table the episode reads touch (train_step_episodes, migration 7): older stores are refused, newer
 * migrations that leave the episode tables alone do not stop a stopped peer's episodes from being read.
 */
const EPISODE_READS_SCHEMA_VERSION = 7;

const STATES = episodeStateSchema.options;
const KINDS = episodeKindSchema.options;
const isoTime = z.union([z.iso.datetime({ offset: true }), z.iso.date()]);

export const episodesCommand: Command = {
  name: 'episodes',
  summary: 'list, show and export episodes (calls, timelines, merge decisions), of a running or stopped peer',
  usage: `agentjet episodes list [filters] [--sort S] [--limit N] | show ID | export ID [--out FILE] [--naive]
                  | export --all [filters] [--from T] [--before T] [--step N] [--out FILE] [--naive]

  list            id, model, task, kind, state, reward, policy version, calls, created (newest first)
  show ID         one episode with its calls
  export ID       the timeline export (JSON, format agentjet.episode/1) to stdout or --out FILE
  export --all    every selected episode's export, one JSON line each (JSONL), oldest first, streamed

With a peer running on the data dir the command asks it; otherwise it reads the store there, read-only.

Filters (list and export --all):
  --model M         only this model's episodes
  --task T          only this task id
  --client C        only episodes this client (runner name or peer id) ran
  --state S[,S…]    ${STATES.join(', ')}
  --kind K          ${KINDS.join(', ')}
  --version N       only episodes begun at policy version N
  --from T          export --all: created at or after T (ISO time, e.g. 2026-01-31T12:00:00Z or 2026-01-31)
  --before T        export --all: created before T
  --step N          export --all: the episodes train step N of --model trained on
Options:
  --data-dir DIR    the peer's data folder (default: AGENTJET_DATA_DIR, else the platform's app-data folder)
  --sort S          list: ${EPISODE_SORTS.join(', ')} (default newest)
  --limit N         list: at most N (default ${EPISODE_PAGE_DEFAULT}, at most ${EPISODE_PAGE_MAX})
  --all             export: every selected episode instead of one ID
  --out FILE        export: write to FILE (complete or not at all) instead of stdout
  --naive           export: one timeline per call (for comparison) instead of merged
  --json            list/show: print JSON`,
  options: {
    ...dataDirOption,
    model: { type: 'string' },
    task: { type: 'string' },
    client: { type: 'string' },
    state: { type: 'string' },
    kind: { type: 'string' },
    version: { type: 'string' },
    from: { type: 'string' },
    before: { type: 'string' },
    step: { type: 'string' },
    sort: { type: 'string' },
    limit: { type: 'string' },
    all: { type: 'boolean' },
    out: { type: 'string' },
    naive: { type: 'boolean' },
    json: { type: 'boolean' },
  },
  positionals: { min: 1, max: 2, names: 'a subcommand: list, show ID, export ID or export --all' },
  async run(values, [sub, id]) {
    if (sub === 'list') {
      if (id !== undefined) throw new UsageError(`list takes no argument, got "${id}"`);
      refuseFlags(values, ['from', 'before', 'step', 'all', 'out', 'naive'], 'list');
      const filter = listFilterOf(values);
      return printPage(values, await withAccess(values, (peer) => peer.client.get<EpisodePage>(`/episodes?${queryOf(filter)}`), (db) => listEpisodes(db, filter)));
    }
    if (sub !== 'show' && sub !== 'export') throw new UsageError(`unknown subcommand "${sub}"; use list, show ID, export ID or export --all`);
    if (sub === 'export' && values.all) {
      if (id !== undefined) throw new UsageError('export --all takes no episode id; use export ID for one episode');
      refuseFlags(values, ['sort', 'limit', 'json'], 'export --all');
      return exportAll(values, selectionOf(values));
    }
    if (!id) throw new UsageError(`${sub} needs an episode id (or, for export, --all)`);
    refuseFlags(values, ['model', 'task', 'client', 'state', 'kind', 'version', 'from', 'before', 'step', 'sort', 'limit', 'all'], `${sub} ID`);
    const path = `/episodes/${encodeURIComponent(id)}`;
    if (sub === 'show') {
      const shown = await withAccess(values, (peer) => peer.client.get<EpisodeDetail>(path), (db) => {
        const detail = getEpisodeDetail(db, id);
        if (!detail) throw new EpisodeNotFoundError(id);
        return detail;
      });
      return printDetail(values, shown);
    }
    const mode = values.naive ? 'naive' : 'merged';
    const exported = await withAccess(
      values,
      (peer) => peer.client.get<EpisodeExport>(`${path}/export?mode=${mode}`),
      (db) => {
        const episode = getEpisodeDetail(db, id)?.episode;
        if (!episode) throw new EpisodeNotFoundError(id);
        return getEpisodeExport(db, id, exportTokenizer(undefined, episode.model), mode);
      },
    );
    const text = JSON.stringify(exported, null, 2) + '\n';
    if (values.out) {
      await writeWhole(values.out as string, async (out) => void (await write(out, text)));
      process.stderr.write(`wrote ${values.out} (${exported.calls.length} calls, ${exported.timelines.length} timelines)\n`);
    } else process.stdout.write(text);
    return 0;
  },
};

/** Asks the running peer, or reads the stopped peer's store (closed afterwards). */
async function withAccess<T>(
  values: OptionValues,
  online: (peer: Extract<PeerAccess, { kind: 'peer' }>) => Promise<T>,
  offline: (db: Database) => T | Promise<T>,
): Promise<T> {
  const access = peerOrOffline(dataDirOf(values));
  if (access.kind === 'peer') return online(access);
  const db = openOfflineStore(access.dataDir, { minSchemaVersion: EPISODE_READS_SCHEMA_VERSION });
  try {
    return await offline(db);
  } finally {
    db.close();
  }
}

function refuseFlags(values: OptionValues, flags: string[], sub: string): void {
  const given = flags.filter((flag) => values[flag] !== undefined);
  if (given.length > 0) throw new UsageError(`${given.map((f) => `--${f}`).join(', ')} ${given.length > 1 ? 'do' : 'does'} not apply to ${sub}`);
}

function text(values: OptionValues, flag: string): string | undefined {
  const value = values[flag];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value === '') throw new UsageError(`--${flag} needs a value`);
  return value;
}

function oneOf<T extends string>(flag: string, value: string | undefined, allowed: readonly T[]): T | undefined {
  if (value === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(value)) throw new UsageError(`--${flag} must be one of ${allowed.join(', ')}, got "${value}"`);
  return value as T;
}

function wholeNumber(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,15}$/.test(value)) throw new UsageError(`--${flag} must be a whole number ≥ 0, got "${value}"`);
  return Number(value);
}

function time(flag: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (!isoTime.safeParse(value).success)
    throw new UsageError(`--${flag} must be an ISO time, e.g. 2026-01-31T12:00:00Z or 2026-01-31, got "${value}"`);
  return value;
}

/** The filters every selecting subcommand takes. */
function commonSelection(values: OptionValues): EpisodeSelection {
  const stateText = text(values, 'state');
  const states = stateText?.split(',').map((state) => oneOf<EpisodeState>('state', state, STATES) as EpisodeState);
  const selection: EpisodeSelection = {
    model: text(values, 'model'),
    taskId: text(values, 'task'),
    client: text(values, 'client'),
    kind: oneOf<EpisodeKind>('kind', text(values, 'kind'), KINDS),
    policyVersion: wholeNumber('version', text(values, 'version')),
    state: states,
  };
  return withoutUndefined(selection);
}

function listFilterOf(values: OptionValues): EpisodeFilter {
  const limitText = text(values, 'limit');
  const limit = limitText === undefined ? undefined : parsePositiveInt('--limit', limitText, EPISODE_PAGE_DEFAULT);
  if (limit !== undefined && limit > EPISODE_PAGE_MAX) throw new UsageError(`--limit must be at most ${EPISODE_PAGE_MAX}, got ${limit}`);
  const sort = oneOf<EpisodeSort>('sort', text(values, 'sort'), EPISODE_SORTS);
  return withoutUndefined({ ...commonSelection(values), sort, limit });
}

function selectionOf(values: OptionValues): EpisodeSelection {
  const selection = commonSelection(values);
  const step = wholeNumber('step', text(values, 'step'));
  if (step !== undefined && selection.model === undefined) throw new UsageError('--step needs --model: a train step is named within its model');
  return withoutUndefined({
    ...selection,
    createdFrom: time('from', text(values, 'from')),
    createdBefore: time('before', text(values, 'before')),
    trainStep: step === undefined ? undefined : { model: selection.model as string, step },
  });
}

function withoutUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

/** The control API's query parameters (episodes/control-routes.ts) for a filter. */
function queryOf(filter: EpisodeFilter): URLSearchParams {
  const { trainStep, state, episodeIds, text: _text, ...plain } = filter;
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(plain)) query.set(key, String(value));
  if (state !== undefined) query.set('state', typeof state === 'string' ? state : state.join(','));
  if (episodeIds !== undefined) query.set('episodeIds', episodeIds.join(','));
  if (trainStep !== undefined) query.set('step', String(trainStep.step));
  return query;
}

function printPage(values: OptionValues, page: EpisodePage): number {
  if (values.json) {
    process.stdout.write(JSON.stringify(page, null, 2) + '\n');
    return 0;
  }
  const rows = page.episodes.map((e) =>
    [e.id, e.model, e.taskId, e.kind, e.state, e.reward === null ? '-' : String(e.reward), `v${e.policyVersion}`, String(e.calls), e.createdAt].join('  '),
  );
  process.stdout.write(
    [`${page.episodes.length} of ${page.total} episodes (id, model, task, kind, state, reward, policy version, calls, created)`, ...rows].join('\n') + '\n',
  );
  return 0;
}

function printDetail(values: OptionValues, shown: EpisodeDetail): number {
  if (values.json) {
    process.stdout.write(JSON.stringify(shown, null, 2) + '\n');
    return 0;
  }
  const e = shown.episode;
  const lines = [
    `episode ${e.id}: ${e.state}${e.abortReason ? ` (${e.abortReason})` : ''}, model ${e.model}, task ${e.taskId}, ${e.kind}, reward ${e.reward ?? '-'}`,
    `  created ${e.createdAt}, ended ${e.endedAt ?? '-'}, policy v${e.policyVersion}` +
      (e.client ? `, client ${e.client}` : '') +
      (e.teamId ? `, team ${e.teamId}` : '') +
      (e.cancelledCalls ? `, ${e.cancelledCalls} call(s) cancelled by a client hang-up` : ''),
    ...shown.calls.map(
      (c) => `  call ${c.index} ${c.callId}: ${c.promptIds.length} prompt + ${c.generatedIds.length} generated tokens, ${c.finishReason ?? '-'}, policy v${c.policyVersion}`,
    ),
  ];
  process.stdout.write(lines.join('\n') + '\n');
  return 0;
}

/** `export --all`: JSONL from the peer's /api/episodes.jsonl, or from the store's export generator. */
async function exportAll(values: OptionValues, selection: EpisodeSelection): Promise<number> {
  const mode = values.naive ? 'naive' : 'merged';
  const out = values.out as string | undefined;
  const access = peerOrOffline(dataDirOf(values));
  if (access.kind === 'peer') {
    const path = `/episodes.jsonl?${queryOf(selection)}&mode=${mode}`;
    if (out) {
      const bytes = await access.client.download(path, out);
      process.stderr.write(`wrote ${out} (${bytes} bytes)\n`);
      return 0;
    }
    let res: Response;
    try {
      res = await fetch(`${access.apiUrl}${path}`, { headers: { authorization: `Bearer ${access.token}` } });
    } catch {
      throw new PeerNotRunningError(`the peer at ${access.apiUrl} does not answer; it may have stopped`);
    }
    if (!res.ok || !res.body) {
      const error = ((await res.json().catch(() => null)) as { error?: { name?: string; message?: string } } | null)?.error;
      const name = error?.name ?? 'HttpError';
      throw new PeerRequestError(res.status, name, `${name}: ${error?.message ?? `HTTP ${res.status}`}`);
    }
    await pipeline(Readable.fromWeb(res.body as WebReadableStream), process.stdout, { end: false });
    return 0;
  }
  const db = openOfflineStore(access.dataDir, { minSchemaVersion: EPISODE_READS_SCHEMA_VERSION });
  try {
    const records = exportEpisodes(db, selection, (model) => exportTokenizer(undefined, model), { mode });
    const writeAll = async (target: Writable) => {
      let count = 0;
      for (const record of records) {
        await write(target, `${JSON.stringify(record)}\n`);
        count++;
      }
      return count;
    };
    if (out) {
      const count = await writeWhole(out, writeAll);
      process.stderr.write(`wrote ${out} (${count} episodes)\n`);
    } else await writeAll(process.stdout);
    return 0;
  } finally {
    db.close();
  }
}

/** Writes, waiting for 'drain' when the target's buffer is full (a slow pipe or disk): memory stays bounded. */
async function write(target: Writable, chunk: string): Promise<void> {
  if (!target.write(chunk)) await once(target, 'drain');
}

/** Writes FILE under a temporary name and renames it when complete: an interrupted export leaves no short file. */
async function writeWhole<T>(file: string, fill: (out: WriteStream) => Promise<T>): Promise<T> {
  const partial = `${file}.partial`;
  const out = createWriteStream(partial);
  try {
    const result = await fill(out);
    out.end();
    await once(out, 'close');
    renameSync(partial, file);
    return result;
  } catch (err) {
    out.destroy();
    rmSync(partial, { force: true });
    throw err;
  }
}
