/**
 * Attached agent scripts: their statuses (GET /api/clients, then kept live by `client` events), the
 * chosen one's recent runs, throughput samples for episodes/s, and the attach form (the dropped script and the
 * options last used per name, so dropping a new version under the same name hot-swaps it with the same tasks).
 */
import type { StateCreator } from 'zustand';
import type { ClientRunRecord, ClientStatus } from '../../../../swarm/common/runner-api.ts';
import { stripScriptExtension } from '../../../../swarm/common/script-extensions.ts';
import type { AppStore } from '../types.ts';

/** A dropped or chosen script: its path on the peer (Electron), or its content (browser upload). */
export type DroppedScript = { filename: string; path: string } | { filename: string; content: string };

export interface AttachDraft {
  name: string;
  script: DroppedScript | null;
  /** A JSONL task file on the peer's machine, or tasks uploaded inline. */
  tasksPath: string;
  inlineTasks: Record<string, unknown>[] | null;
  inlineTasksName: string | null;
  model: string;
  repeat: number;
  concurrency: number;
  weight: number;
}

/** (time ms, episodes finished) per client, to measure episodes/s over a recent window. */
export interface ThroughputSample {
  at: number;
  finished: number;
}

/** How many samples per client are kept: a minute of once-a-second updates. */
export const MAX_THROUGHPUT_SAMPLES = 60;

export interface ClientsState {
  list: readonly ClientStatus[];
  loaded: boolean;
  error: string | null;
  throughput: Readonly<Record<string, readonly ThroughputSample[]>>;
  selected: string | null;
  runs: readonly ClientRunRecord[];
  runsError: string | null;
  draft: AttachDraft;
  /** The last options attached under each name: a hot swap reuses them. */
  lastAttached: Readonly<Record<string, Omit<AttachDraft, 'script' | 'name'>>>;
  attaching: boolean;
  attachError: string | null;
  /** What the last attach did, for the user: "Attached echo v1" / "Hot-swapped echo to v2". */
  attachNotice: string | null;
}

export interface ClientsActions {
  clientsLoaded(list: readonly ClientStatus[], at: number): void;
  clientsFailed(message: string): void;
  /** A `client` event, or the answer of an action on one client. */
  clientUpdated(status: ClientStatus, at: number): void;
  clientRemoved(name: string): void;
  clientSelected(name: string | null): void;
  clientRunsLoaded(name: string, runs: readonly ClientRunRecord[]): void;
  clientRunsFailed(name: string, message: string): void;
  scriptDropped(script: DroppedScript): void;
  attachDraftChanged(patch: Partial<AttachDraft>): void;
  attachStarted(): void;
  attachFinished(status: ClientStatus, at: number): void;
  attachFailed(message: string): void;
}

export type ClientsSlice = { clients: ClientsState } & ClientsActions;

export const emptyDraft: AttachDraft = {
  name: '',
  script: null,
  tasksPath: '',
  inlineTasks: null,
  inlineTasksName: null,
  model: '',
  repeat: 4,
  concurrency: 4,
  weight: 1,
};

export const initialClientsState: ClientsState = {
  list: [],
  loaded: false,
  error: null,
  throughput: {},
  selected: null,
  runs: [],
  runsError: null,
  draft: emptyDraft,
  lastAttached: {},
  attaching: false,
  attachError: null,
  attachNotice: null,
};

export const createClientsSlice: StateCreator<AppStore, [], [], ClientsSlice> = (set) => {
  const update = (fn: (s: ClientsState) => Partial<ClientsState> | null) =>
    set((store) => {
      const patch = fn(store.clients);
      return patch ? { clients: { ...store.clients, ...patch } } : store;
    });
  return {
    clients: initialClientsState,
    clientsLoaded: (list, at) =>
      update((s) => ({
        list,
        loaded: true,
        error: null,
        throughput: list.reduce((acc, c) => withSample(acc, c, at), s.throughput),
      })),
    clientsFailed: (message) => update(() => ({ error: message, loaded: true })),
    clientUpdated: (status, at) =>
      update((s) => ({ list: upsert(s.list, status), throughput: withSample(s.throughput, status, at) })),
    clientRemoved: (name) =>
      update((s) => ({
        list: s.list.filter((c) => c.name !== name),
        selected: s.selected === name ? null : s.selected,
        runs: s.selected === name ? [] : s.runs,
      })),
    clientSelected: (name) =>
      update((s) => (s.selected === name ? null : { selected: name, runs: [], runsError: null })),
    clientRunsLoaded: (name, runs) => update((s) => (s.selected === name ? { runs, runsError: null } : null)),
    clientRunsFailed: (name, message) => update((s) => (s.selected === name ? { runsError: message } : null)),
    scriptDropped: (script) =>
      update((s) => {
        const name = clientNameFromFile(script.filename);
        const remembered = s.lastAttached[name];
        return { draft: { ...s.draft, ...remembered, name, script }, attachError: null, attachNotice: null };
      }),
    attachDraftChanged: (patch) => update((s) => ({ draft: { ...s.draft, ...patch } })),
    attachStarted: () => update(() => ({ attaching: true, attachError: null, attachNotice: null })),
    attachFinished: (status, at) =>
      update((s) => {
        const { script: _script, name: _name, ...options } = s.draft;
        const notice =
          status.version > 1
            ? `Hot-swapped ${status.name} to version ${status.version}`
            : `Attached ${status.name}`;
        return {
          attaching: false,
          attachNotice: notice,
          list: upsert(s.list, status),
          throughput: withSample(s.throughput, status, at),
          lastAttached: { ...s.lastAttached, [status.name]: options },
          draft: { ...s.draft, script: null },
          selected: status.name,
        };
      }),
    attachFailed: (message) => update(() => ({ attaching: false, attachError: message })),
  };
};

function upsert(list: readonly ClientStatus[], status: ClientStatus): ClientStatus[] {
  const index = list.findIndex((c) => c.name === status.name);
  if (index === -1) return [...list, status].sort((a, b) => a.name.localeCompare(b.name));
  const next = [...list];
  next[index] = status;
  return next;
}

function withSample(
  throughput: ClientsState['throughput'],
  status: ClientStatus,
  at: number,
): ClientsState['throughput'] {
  const finished = status.counts.ended + status.counts.aborted;
  const samples = throughput[status.name] ?? [];
  const last = samples[samples.length - 1];
  if (last && last.finished === finished && at - last.at < 1000) return throughput;
  return { ...throughput, [status.name]: [...samples, { at, finished }].slice(-MAX_THROUGHPUT_SAMPLES) };
}

/** A client name from a script's file name: `my agent.v2.py` → `my-agent.v2` (the API's name rules). */
export function clientNameFromFile(filename: string): string {
  const base = stripScriptExtension(filename);
  const cleaned = base
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/^[^A-Za-z0-9]+/, '')
    .slice(0, 64);
  return cleaned || 'agent';
}
