import type { CallRecord } from '../../../../swarm/common/timeline/call.ts';
import { queryString } from '../../api/client.ts';
import { EPISODE_PAGE_SIZE, type EpisodesState } from './slice.ts';
import { FINISHED_STATES, type EpisodeFilter, type EpisodeListItem, type EpisodeSort } from './types.ts';

export type ChatMessage = CallRecord['messages'][number];

function rowCount(episodes: EpisodesState): number {
  return episodes.total ?? 0;
}

/** The row at a list index, or undefined while its page is not loaded. */
function rowAt(episodes: EpisodesState, index: number): EpisodeListItem | undefined {
  const page = episodes.pages[Math.floor(index / EPISODE_PAGE_SIZE)];
  return page?.rows[index % EPISODE_PAGE_SIZE];
}

/**
 * Pages that cover rows [first, last] and must be fetched: missing or stale, and not already requested in this
 * generation. Before the first answer, page 0 (which also brings the total).
 */
function pagesToLoad(episodes: EpisodesState, first: number, last: number): number[] {
  if (episodes.total === null) return episodes.pending[0] === episodes.generation ? [] : [0];
  // Page 0 is always wanted: it carries the total, so an empty list learns when episodes arrive.
  const lastRow = Math.max(0, Math.min(last, episodes.total - 1));
  const wanted: number[] = [];
  for (
    let page = Math.floor(Math.max(0, first) / EPISODE_PAGE_SIZE);
    page * EPISODE_PAGE_SIZE <= lastRow;
    page++
  ) {
    const cached = episodes.pages[page];
    const fresh = cached !== undefined && cached.generation === episodes.generation;
    if (!fresh && episodes.pending[page] !== episodes.generation) wanted.push(page);
  }
  return wanted;
}

/**
 * The request for one page. Free text goes to the UI search route (`/ui/episodes?q=`); the structured filters
 * to `/episodes`, which every peer has.
 */
function pagePath(filter: EpisodeFilter, pageIndex: number): string {
  const query = filter.query.trim();
  const params = {
    model: filter.model || undefined,
    taskId: filter.taskId || undefined,
    kind: filter.kind || undefined,
    state: filter.state || undefined,
    client: filter.client || undefined,
    policyVersion: filter.policyVersion || undefined,
    // The default order is left out: a peer from before sorting existed answers the same.
    sort: filter.sort === 'newest' ? undefined : filter.sort,
    limit: EPISODE_PAGE_SIZE,
    offset: pageIndex * EPISODE_PAGE_SIZE,
  };
  return query ? `/ui/episodes${queryString({ q: query, ...params })}` : `/episodes${queryString(params)}`;
}

function isFiltered(filter: EpisodeFilter): boolean {
  return Boolean(
    filter.model || filter.taskId || filter.kind || filter.state || filter.client || filter.policyVersion || filter.query.trim(),
  );
}

/** The Reward header's click: highest first, then lowest first, then back to the time order. */
function nextRewardSort(sort: EpisodeSort): EpisodeSort {
  if (sort === 'reward-desc') return 'reward-asc';
  if (sort === 'reward-asc') return 'newest';
  return 'reward-desc';
}

/** The request for one side of a comparison: the task's latest finished episode at that version. */
function comparePath(taskId: string, version: number): string {
  return `/episodes${queryString({ taskId, policyVersion: version, state: FINISHED_STATES.join(','), limit: 1 })}`;
}

export interface AgentConversation {
  agentKey: string;
  /** What the agent sent on its last call, then what the model answered. */
  messages: ChatMessage[];
  calls: number;
}

/**
 * The episode as each agent saw it: its last call's messages (which carry the whole history it kept) followed by
 * the answer it got. An episode with several agents (a team) has one conversation each, in order of first call.
 */
function conversations(calls: readonly CallRecord[]): AgentConversation[] {
  const byAgent = new Map<string, { last: CallRecord; calls: number }>();
  for (const call of calls) {
    const entry = byAgent.get(call.agentKey);
    if (entry) {
      entry.calls += 1;
      if (call.index > entry.last.index) entry.last = call;
    } else byAgent.set(call.agentKey, { last: call, calls: 1 });
  }
  return [...byAgent.entries()].map(([agentKey, { last, calls: count }]) => ({
    agentKey,
    messages: last.assistantMessage ? [...last.messages, last.assistantMessage] : [...last.messages],
    calls: count,
  }));
}

export const episodesSelectors = { rowCount, rowAt, pagesToLoad, pagePath, isFiltered, nextRewardSort, comparePath, conversations };
