/** The Runs view: the list of every run, a run's page (`#/runs/<id>`) or a comparison (`#/runs/compare/<ids>`). */
import { useAppStore } from '../../store/index.ts';
import { runsRoute } from '../../store/runs/route.ts';
import { CompareView } from './CompareView.tsx';
import { RunPage } from './RunPage.tsx';
import { RunsListPanel } from './RunsList.tsx';
import '../episodes/data-views.css';
import './runs.css';

export function RunsView() {
  const path = useAppStore((s) => s.navigation.path);
  const route = runsRoute(path);
  switch (route.kind) {
    case 'list':
      return <RunsListPanel />;
    case 'run':
      return <RunPage key={route.id} id={route.id} />;
    case 'compare':
      return <CompareView key={route.ids.join(',')} ids={route.ids} />;
  }
}
