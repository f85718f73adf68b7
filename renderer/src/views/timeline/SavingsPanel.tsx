/** What merging saved: naive (one sample per call) vs merged tokens, for the episode and for its model's run. */
import { Panel } from '../../components/Panel.tsx';
import { formatCount } from '../../format.ts';
import { useAppStore } from '../../store/index.ts';
import { timelineSelectors, type SavingsSummary } from '../../store/timeline/selectors.ts';

export function SavingsPanel() {
  const doc = useAppStore((s) => s.timeline.doc);
  const run = useAppStore((s) => s.timeline.runSavings);
  const runError = useAppStore((s) => s.timeline.runSavingsError);
  if (!doc) return null;
  const episode = timelineSelectors.savingsSummary(doc.savings);
  return (
    <div className="grid grid--two">
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
    </div>
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
