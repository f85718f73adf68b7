/** The panels of one or more runs as the store holds them, rebuilt only when one of those runs changes. */
import { useMemo } from 'react';
import { useShallow } from 'zustand/react/shallow';
import { useAppStore } from '../../store/index.ts';
import { emptyRunRecord } from '../../store/runs/slice.ts';
import { compareColour } from '../charts/RunChart.tsx';
import { buildPanels, type PanelSpec } from './panels.ts';

export interface RunPanels {
  panels: PanelSpec[];
  /** For RunChart's `version`: moves whenever any run's steps or evals change. */
  version: number;
  /** Steps held over all the runs. */
  steps: number;
}

export function useRunPanels(ids: readonly string[]): RunPanels {
  // Records are immutable and compared one by one: another run's change leaves this array, and the panels, as they are.
  const records = useAppStore(useShallow((s) => ids.map((id) => s.runs.byId[id] ?? emptyRunRecord)));
  const panels = useMemo(
    () =>
      buildPanels(
        records.map((record, index) => ({
          key: ids[index],
          label: record.detail?.name ?? ids[index],
          colour: compareColour(index),
          steps: record.steps,
          evals: record.evals,
          config: record.detail?.config ?? null,
          events: record.detail?.events ?? [],
        })),
      ),
    // eslint-disable-next-line react-hooks/exhaustive-deps -- `ids` is fixed for the page (it is keyed by them); the records are what change
    [records],
  );
  return {
    panels,
    version: records.reduce((sum, r) => sum + r.version, 0),
    steps: records.reduce((sum, r) => sum + r.steps.length, 0),
  };
}
