/**
 * What merging saved: naive (one sample per call) vs merged tokens, for the episode and for its model's run; and
 * what the episode shares with its GRPO group, which tree training computes once for the whole group.
 */
import type { EpisodeGroupShare } from '../../../../swarm/common/api.ts';
import { Panel } from '../../components/Panel.tsx';
import { formatCount } from '../../format.ts';
import { useAppStore } from '../../store/index.ts';
import { timelineSelectors, type SavingsSummary } from '../../store/timeline/selectors.ts';

export function SavingsPanel() {
  const doc = useAppStore((s) => s.timeline.doc);
  const run = useAppStore((s) => s.timeline.runSavings);
  const runError = useAppStore((s) => s.timeline.runSavingsError);
  const group = useAppStore((s) => s.timeline.groupShare);
  const groupError = useAppStore((s) => s.timeline.groupShareError);
  if (!doc) return null;
  const episode = timelineSelectors.savingsSummary(doc.savings);
  return (
    <div className="grid grid--three">
      <Panel
        title="This episode"
        testId="episode-savings"
        aside={<span className="mono small muted">{doc.mode}</span>}
      >
        <SavingsFigures summary={episode} testPrefix="episode" />
        <p className="hint">
          {doc.savings.calls} calls in {doc.savings.timelines}{' '}
          {doc.savings.timelines === 1 ? 'timeline' : 'timelines'}
          {doc.savings.mergeRate !== null && (
            <> · {Math.round(doc.savings.mergeRate * 100)}% of eligible calls joined</>
          )}{' '}
          · reward {doc.episode.reward ?? '—'}
        </p>
      </Panel>
      <Panel
        title="The run"
        testId="run-savings"
        aside={<span className="mono small muted">{doc.episode.model}</span>}
      >
        {run ? (
          <>
            <SavingsFigures summary={timelineSelectors.savingsSummary(run)} testPrefix="run" />
            <p className="hint">
              Over {formatCount(run.episodes)} ended episodes of {doc.episode.model} ({formatCount(run.calls)}{' '}
              calls).
            </p>
          </>
        ) : (
          <p className="muted">{runError ?? 'Loading…'}</p>
        )}
      </Panel>
      <Panel title="Its group" testId="group-share" aside={group && <span className="mono small muted">{group.groupId}</span>}>
        {group ? <GroupShareFigures share={group} /> : <p className="muted">{groupError ?? 'Loading…'}</p>}
      </Panel>
    </div>
  );
}

const BASIS: Record<EpisodeGroupShare['basis'], string> = {
  step: 'trained together in one step',
  queued: 'ended, waiting for a step together',
  alone: 'no other episode of its group',
};

function GroupShareFigures({ share }: { share: EpisodeGroupShare }) {
  const shared = share.tokens > 0 ? share.sharedTokens / share.tokens : 0;
  const ratio = share.groupTreeTokens > 0 ? share.groupMergedTokens / share.groupTreeTokens : 1;
  return (
    <>
      <div className="savings">
        <Figure label="Shared with its group" value={`${formatCount(share.sharedTokens)} (${Math.round(shared * 100)}%)`} testId="group-shared-tokens" />
        <Figure label="Group merged tokens" value={formatCount(share.groupMergedTokens)} testId="group-merged-tokens" />
        <Figure label="Group tree tokens" value={formatCount(share.groupTreeTokens)} testId="group-tree-tokens" />
        <Figure label="Tree ratio" value={`${ratio.toFixed(2)}×`} testId="group-tree-ratio" strong />
      </div>
      <p className="hint">
        {share.episodes} {share.episodes === 1 ? 'episode' : 'episodes'} · {BASIS[share.basis]}. A prefix they share is computed once when the
        group trains as a tree.
      </p>
    </>
  );
}

function SavingsFigures({ summary, testPrefix }: { summary: SavingsSummary; testPrefix: string }) {
  return (
    <div className="savings">
      <Figure
        label="Naive tokens"
        value={formatCount(summary.naiveTokens)}
        testId={`${testPrefix}-naive-tokens`}
      />
      <Figure
        label="Merged tokens"
        value={formatCount(summary.mergedTokens)}
        testId={`${testPrefix}-merged-tokens`}
      />
      <Figure
        label="Saved"
        value={`${formatCount(summary.savedTokens)} (${Math.round(summary.savedShare * 100)}%)`}
        testId={`${testPrefix}-saved-tokens`}
      />
      <Figure
        label="Ratio"
        value={`${summary.tokenRatio.toFixed(2)}×`}
        testId={`${testPrefix}-token-ratio`}
        strong
      />
    </div>
  );
}

function Figure({
  label,
  value,
  testId,
  strong,
}: {
  label: string;
  value: string;
  testId: string;
  strong?: boolean;
}) {
  return (
    <div className="savings__figure" data-strong={strong || undefined}>
      <div className="savings__value mono" data-testid={testId}>
        {value}
      </div>
      <div className="savings__label">{label}</div>
    </div>
  );
}
