/** `agentjet episodes list | show ID | export ID [--out FILE]`: the running peer's episodes, from its store. */
import { writeFileSync } from 'node:fs';
import type { EpisodeExport } from '../../common/timeline/export.ts';
import { EPISODE_PAGE_DEFAULT, EPISODE_PAGE_MAX, type EpisodePage } from '../store/episode-list.ts';
import type { EpisodeDetail } from '../store/episode-reads.ts';
import { parsePositiveInt, UsageError, type Command } from './command.ts';
import { dataDirOption, dataDirUsage, PeerClient } from './peer-client.ts';

export const episodesCommand: Command = {
  name: 'episodes',
  summary: 'list, show and export episodes (calls, timelines, merge decisions)',
  usage: `agentjet episodes list [--model M] [--limit N] | show ID | export ID [--out FILE] [--naive]

  list        newest first: id, model, task, kind, state, reward, calls
  show ID     one episode with its calls
  export ID   the timeline export (JSON, format agentjet.episode/1) to stdout or --out FILE

Options:
${dataDirUsage}
  --model M         list: only this model's episodes
  --limit N         list: at most N (default ${EPISODE_PAGE_DEFAULT}, at most ${EPISODE_PAGE_MAX})
  --out FILE        export: write to FILE instead of stdout
  --naive           export: one timeline per call (for comparison) instead of merged
  --json            list/show: print JSON`,
  options: {
    ...dataDirOption,
    model: { type: 'string' },
    limit: { type: 'string' },
    out: { type: 'string' },
    naive: { type: 'boolean' },
    json: { type: 'boolean' },
  },
  positionals: { min: 1, max: 2, names: 'a subcommand: list, show ID or export ID' },
  async run(values, [sub, id]) {
    if (sub === 'list') {
      if (id !== undefined) throw new UsageError(`list takes no argument, got "${id}"`);
      const query = new URLSearchParams();
      if (values.model) query.set('model', values.model as string);
      if (values.limit !== undefined) {
        const limit = parsePositiveInt('--limit', values.limit as string, EPISODE_PAGE_DEFAULT);
        if (limit > EPISODE_PAGE_MAX) throw new UsageError(`--limit must be at most ${EPISODE_PAGE_MAX}, got ${limit}`);
        query.set('limit', String(limit));
      }
      const page = await PeerClient.fromDataDir(values).get<EpisodePage>(`/episodes?${query}`);
      if (values.json) {
        process.stdout.write(JSON.stringify(page, null, 2) + '\n');
        return 0;
      }
      const rows = page.episodes.map((e) =>
        [e.id, e.model, e.taskId, e.kind, e.state, e.reward === null ? '-' : String(e.reward), String(e.calls), e.createdAt].join('  '),
      );
      process.stdout.write([`${page.episodes.length} of ${page.total} episodes (id, model, task, kind, state, reward, calls, created)`, ...rows].join('\n') + '\n');
      return 0;
    }
    if (sub !== 'show' && sub !== 'export') throw new UsageError(`unknown subcommand "${sub}"; use list, show ID or export ID`);
    if (!id) throw new UsageError(`${sub} needs an episode id`);
    const client = PeerClient.fromDataDir(values);
    const path = `/episodes/${encodeURIComponent(id)}`;
    if (sub === 'show') {
      const shown = await client.get<EpisodeDetail>(path);
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
    const exported = await client.get<EpisodeExport>(`${path}/export?mode=${values.naive ? 'naive' : 'merged'}`);
    const text = JSON.stringify(exported, null, 2) + '\n';
    if (values.out) {
      writeFileSync(values.out as string, text);
      process.stderr.write(`wrote ${values.out} (${exported.calls.length} calls, ${exported.timelines.length} timelines)\n`);
    } else process.stdout.write(text);
    return 0;
  },
};
