/**
 * Which desktop notifications the peer's events call for: a training run that ended (finished its steps, or
 * failed) and a client script whose circuit breaker opened. Pure and stateful: it remembers what it announced, so a
 * state seen again (every status tick repeats it) is not announced twice. The shell feeds it the control API's
 * WebSocket events (peer-events.ts) and shows what it returns with Electron's Notification.
 */
import { z } from 'zod';
import type { ServerEvent, StatusPayload, TrainStepSummary } from '../swarm/common/api.ts';
import type { ViewId } from './common/views.ts';

export interface DesktopNotice {
  title: string;
  body: string;
  /** The view a click on the notification opens. */
  view: ViewId;
}

/** The part of GET /api/models/:name/training the notices need, checked at the edge. */
export const trainingStateSchema = z.looseObject({
  model: z.string(),
  status: z.enum(['stopped', 'running', 'paused', 'finished', 'failed']),
  step: z.number(),
  lastError: z.string().nullable().optional(),
});
export type TrainingStateView = z.infer<typeof trainingStateSchema>;

export interface NoticeUpdate {
  notices: DesktopNotice[];
  /** Models whose training state is worth fetching now (a step ended, or the engine changed state). */
  checkTraining: string[];
}

export class RunNotices {
  private readonly trainingStatus = new Map<string, TrainingStateView['status']>();
  private readonly engineState = new Map<string, string>();
  private readonly lastStep = new Map<string, TrainStepSummary>();
  private readonly openBreakers = new Set<string>();

  event(event: ServerEvent): NoticeUpdate {
    switch (event.type) {
      case 'train-step':
        this.lastStep.set(event.data.model, event.data);
        return { notices: [], checkTraining: [event.data.model] };
      case 'status':
        return this.status(event.data);
      case 'client-paused': {
        if (!event.data.breaker || this.openBreakers.has(event.data.name)) return nothing();
        this.openBreakers.add(event.data.name);
        return {
          notices: [{ title: `Client ${event.data.name} stopped: circuit breaker open`, body: event.data.reason, view: 'clients' }],
          checkTraining: [],
        };
      }
      case 'client':
        // Resumed (or re-attached): a later breaker is news again.
        if (event.data.state !== 'broken') this.openBreakers.delete(event.data.name);
        return nothing();
      default:
        return nothing();
    }
  }

  /** The training state fetched after `checkTraining`: a run that reached finished or failed is announced once. */
  training(state: TrainingStateView): DesktopNotice[] {
    const before = this.trainingStatus.get(state.model);
    this.trainingStatus.set(state.model, state.status);
    if (before === state.status) return [];
    const step = this.lastStep.get(state.model);
    const reward = step ? ` · reward mean ${step.rewardMean.toFixed(3)}` : '';
    if (state.status === 'finished')
      return [{ title: `Training of ${state.model} finished`, body: `Step ${state.step}${reward}`, view: 'models' }];
    if (state.status === 'failed')
      return [{ title: `Training of ${state.model} failed`, body: state.lastError ?? `at step ${state.step}`, view: 'models' }];
    return [];
  }

  private status(status: StatusPayload): NoticeUpdate {
    const update: NoticeUpdate = { notices: [], checkTraining: [] };
    for (const model of status.models) {
      const before = this.engineState.get(model.name);
      this.engineState.set(model.name, model.engineState);
      if (before === undefined || before === model.engineState) continue;
      update.checkTraining.push(model.name);
      if (model.engineState === 'failed')
        update.notices.push({ title: `Model ${model.name} failed`, body: model.error ?? 'its trainer engine stopped', view: 'models' });
    }
    return update;
  }
}

function nothing(): NoticeUpdate {
  return { notices: [], checkTraining: [] };
}
