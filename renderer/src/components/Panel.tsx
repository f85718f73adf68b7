import type { ReactNode } from 'react';

/** A titled card. `aside` sits at the right of the title row (a count, a badge). */
export function Panel({ title, aside, children, className, testId }: { title: string; aside?: ReactNode; children: ReactNode; className?: string; testId?: string }) {
  const headingId = `panel-${title.toLowerCase().replace(/[^a-z0-9]+/g, '-')}`;
  return (
    <section className={`panel ${className ?? ''}`} aria-labelledby={headingId} data-testid={testId}>
      <header className="panel__header">
        <h2 className="panel__title" id={headingId}>
          {title}
        </h2>
        {aside && <div className="panel__aside">{aside}</div>}
      </header>
      <div className="panel__body">{children}</div>
    </section>
  );
}

/** A label/value list (`<dl>`), one row per fact. */
export function Facts({ children }: { children: ReactNode }) {
  return <dl className="facts">{children}</dl>;
}

export function Fact({ label, children, testId }: { label: string; children: ReactNode; testId?: string }) {
  return (
    <div className="facts__row">
      <dt>{label}</dt>
      <dd data-testid={testId}>{children}</dd>
    </div>
  );
}
