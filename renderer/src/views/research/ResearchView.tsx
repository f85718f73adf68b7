/** The Research view: the list of every study, or a study's page (`#/research/<id>`). */
import { useAppStore } from '../../store/index.ts';
import { researchRoute } from '../../store/research/route.ts';
import { StudiesListPanel } from './StudiesList.tsx';
import { StudyPage } from './StudyPage.tsx';
import '../episodes/data-views.css';
import '../runs/runs.css';
import './research.css';

export function ResearchView() {
  const path = useAppStore((s) => s.navigation.path);
  const route = researchRoute(path);
  switch (route.kind) {
    case 'list':
      return <StudiesListPanel />;
    case 'study':
      return <StudyPage key={route.id} id={route.id} />;
  }
}
