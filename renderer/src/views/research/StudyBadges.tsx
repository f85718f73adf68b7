import type { DecisionOutcome } from '../../../../swarm/common/research/decision.ts';
import type { StudyRunStatus, StudyStatus } from '../../../../swarm/common/research-api.ts';
import { decisionTone, studyStatusTone } from './format.ts';

export function StudyStatusBadge({
  status,
  testId = 'study-status',
}: {
  status: StudyStatus | StudyRunStatus;
  testId?: string;
}) {
  return (
    <span
      className="pill"
      data-state={studyStatusTone(status)}
      data-study-status={status}
      data-testid={testId}
    >
      {status}
    </span>
  );
}

/** The decision's outcome; '—' before the study is analysed. */
export function DecisionBadge({ outcome }: { outcome: DecisionOutcome | null }) {
  if (!outcome) return <span className="muted">—</span>;
  return (
    <span
      className="pill"
      data-state={decisionTone(outcome)}
      data-decision={outcome}
      data-testid="study-decision"
    >
      {outcome}
    </span>
  );
}
