import type { RunStatus } from '../../../../swarm/common/runs-api.ts';
import { statusTone } from './format.ts';

export function RunStatusBadge({ status }: { status: RunStatus }) {
  return (
    <span className="pill" data-state={statusTone(status)} data-run-status={status} data-testid="run-status">
      {status}
    </span>
  );
}
