/**
 * "Compare versions": one task, two policy versions, that task's latest finished episode at each shown side by side
 * (outcome, reward, the conversation), to see what training changed in how the agent answers.
 */
import { useState, type FormEvent } from 'react';
import { Panel } from '../../components/Panel.tsx';
import { apiRequest } from '../../api/page-client.ts';
import { appStore, useAppStore } from '../../store/index.ts';
import { compareVersions } from '../../store/episodes/loaders.ts';
import type { CompareSide } from '../../store/episodes/types.ts';
import { EpisodeConversations, Fact } from './EpisodeDetail.tsx';
import { formatEpisodeTime, formatReward } from './format.ts';

const VERSION = /^\d{1,15}$/;

export function EpisodeCompare() {
  const compare = useAppStore((s) => s.episodes.compare);
  // Start from the proposal made on opening (the open episode's task, its version and the one before).
  const [taskId, setTaskId] = useState(compare?.taskId ?? '');
  const [versionA, setVersionA] = useState(String(compare?.sides[0].version ?? 0));
  const [versionB, setVersionB] = useState(String(compare?.sides[1].version ?? 0));
  const valid = taskId.trim() !== '' && VERSION.test(versionA) && VERSION.test(versionB);

  function submit(event: FormEvent) {
    event.preventDefault();
    if (!valid) return;
    void compareVersions(appStore, apiRequest(), taskId.trim(), [Number(versionA), Number(versionB)]);
  }

  return (
    <Panel
      title="Compare versions"
      testId="episodes-compare-panel"
      aside={
        <button type="button" className="button button--small" onClick={() => appStore.getState().episodeCompareClosed()}>
          Close
        </button>
      }
    >
      <form className="toolbar" aria-label="Choose a task and two versions" onSubmit={submit}>
        <label className="field">
          <span className="field__label">Task</span>
          <input className="input" value={taskId} onChange={(e) => setTaskId(e.target.value)} data-testid="episodes-compare-task" />
        </label>
        <label className="field">
          <span className="field__label">Version</span>
          <input className="input input--narrow" inputMode="numeric" value={versionA} onChange={(e) => setVersionA(e.target.value)} data-testid="episodes-compare-version-a" />
        </label>
        <label className="field">
          <span className="field__label">vs</span>
          <input className="input input--narrow" inputMode="numeric" value={versionB} onChange={(e) => setVersionB(e.target.value)} data-testid="episodes-compare-version-b" />
        </label>
        <button type="submit" className="button button--primary" disabled={!valid} data-testid="episodes-compare-submit">
          Compare
        </button>
      </form>
      {compare?.error && (
        <p className="alert" role="alert">
          {compare.error}
        </p>
      )}
      {compare?.sides.some((side) => side.status !== 'idle') && (
        <div className="episode-compare" data-testid="episodes-compare-result">
          {compare.sides.map((side, index) => (
            <CompareColumn key={index} side={side} taskId={compare.taskId} />
          ))}
        </div>
      )}
    </Panel>
  );
}

function CompareColumn({ side, taskId }: { side: CompareSide; taskId: string }) {
  return (
    <section className="episode-compare__side" aria-label={`Policy version ${side.version}`} data-testid="episodes-compare-side">
      <h3 className="conversation__title">Policy v{side.version}</h3>
      {(side.status === 'loading' || side.status === 'idle') && (
        <p className="muted" aria-busy="true">
          Loading…
        </p>
      )}
      {side.status === 'none' && <p className="muted">No finished episode of {taskId} at v{side.version}.</p>}
      {side.status === 'loaded' && (
        <>
          <dl className="facts">
            <Fact label="Id">
              <code>{side.detail.episode.id}</code>
            </Fact>
            <Fact label="Outcome">
              <span className="state-tag" data-state={side.detail.episode.state}>
                {side.detail.episode.state}
              </span>{' '}
              reward <span className="mono">{formatReward(side.detail.episode.reward)}</span>
            </Fact>
            <Fact label="Time">{formatEpisodeTime(side.detail.episode.createdAt)}</Fact>
          </dl>
          <EpisodeConversations calls={side.detail.calls} />
        </>
      )}
    </section>
  );
}
