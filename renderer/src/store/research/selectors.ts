import type { DecisionCriterion } from '../../../../swarm/common/research/decision.ts';
import { describeCriterion } from '../../../../swarm/common/research/decision.ts';
import type { StudyDetail, StudyStatus, StudySummary } from '../../../../swarm/common/research-api.ts';
import { emptyStudyRecord, type ResearchState, type StudyRecord } from './slice.ts';

function record(research: ResearchState, id: string | null | undefined): StudyRecord {
  return (id && research.byId[id]) || emptyStudyRecord;
}

/** Whether the study still moves (its runs and events change while the page is open). */
function isLive(study: Pick<StudySummary, 'status'>): boolean {
  return study.status === 'planning' || study.status === 'running' || study.status === 'stopping';
}

/** Stop applies to a study still under way; resume to one stopped or failed (its unfinished runs start again). */
function canStop(status: StudyStatus): boolean {
  return status === 'planning' || status === 'running';
}

function canResume(status: StudyStatus): boolean {
  return status === 'stopped' || status === 'failed';
}

/** The criterion in words: the analysis's once analysed, else the spec's decision as written (null if none). */
function criterion(detail: Pick<StudyDetail, 'analysis' | 'spec'>): string | null {
  if (detail.analysis) return detail.analysis.criterion;
  const decision = detail.spec.decision;
  if (typeof decision !== 'object' || decision === null || !('kind' in decision)) return null;
  try {
    return describeCriterion({ confidence: 0.95, test: 'welch', ...decision } as DecisionCriterion);
  } catch {
    return JSON.stringify(decision);
  }
}

export const researchSelectors = { record, isLive, canStop, canResume, criterion };
