/**
 * Where and with what a script runs: a fresh working directory per run (with a private HOME and TMPDIR, removed
 * afterwards) and an environment built from nothing — PATH and LANG from the peer, the episode's AGENTJET_ and
 * OPENAI_ variables. Nothing else of the peer's environment passes (its tokens, its secrets' paths).
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { BeganEpisode } from './episode-api.ts';
import type { EpisodeSpec } from './tasks.ts';

export interface RoleEpisode {
  role: string;
  episode: BeganEpisode;
}

/** Runs `fn` in a new work directory under `root` (with home/ and tmp/), removed afterwards whatever happens. */
export async function inWorkDir<T>(root: string, fn: (workDir: string) => Promise<T>): Promise<T> {
  // Asynchronous: on a busy machine removing a run's tree took ~5 ms of the peer's main thread per episode.
  const workDir = await mkdtemp(join(root, 'agentjet-ep-'));
  try {
    await mkdir(join(workDir, 'home'));
    await mkdir(join(workDir, 'tmp'));
    return await fn(workDir);
  } finally {
    await rm(workDir, { recursive: true, force: true });
  }
}

/**
 * The script's whole environment. A single-model script gets OPENAI_BASE_URL, OPENAI_API_KEY (and the same episode as
 * ANTHROPIC_BASE_URL, the origin, and ANTHROPIC_API_KEY for Anthropic's clients), AGENTJET_MODEL and
 * AGENTJET_EPISODE_ID; a team gets them once per role with the role as suffix (`OPENAI_API_KEY_PROPOSER`) and
 * AGENTJET_ROLES listing the roles.
 */
export function scriptEnv(workDir: string, spec: EpisodeSpec, episodes: RoleEpisode[], team: boolean): Record<string, string> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    LANG: process.env.LANG ?? 'C.UTF-8',
    HOME: join(workDir, 'home'),
    TMPDIR: join(workDir, 'tmp'),
    PYTHONUNBUFFERED: '1',
    PYTHONDONTWRITEBYTECODE: '1',
    AGENTJET_TASK: JSON.stringify(spec.task),
    AGENTJET_TASK_ID: spec.taskId,
    AGENTJET_EPISODE_KIND: spec.kind,
  };
  for (const { role, episode } of episodes) {
    const suffix = team ? `_${role.toUpperCase()}` : '';
    env[`OPENAI_BASE_URL${suffix}`] = episode.baseUrl;
    env[`OPENAI_API_KEY${suffix}`] = episode.apiKey;
    // Anthropic's clients append /v1/messages to their base URL: they take the origin.
    env[`ANTHROPIC_BASE_URL${suffix}`] = episode.baseUrl.replace(/\/v1\/?$/, '');
    env[`ANTHROPIC_API_KEY${suffix}`] = episode.apiKey;
    env[`AGENTJET_MODEL${suffix}`] = episode.model;
    env[`AGENTJET_EPISODE_ID${suffix}`] = episode.episodeId;
  }
  if (team) env.AGENTJET_ROLES = episodes.map((e) => e.role).join(',');
  return env;
}
