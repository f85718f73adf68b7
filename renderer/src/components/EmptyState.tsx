import type { ReactNode } from 'react';
import { CopyButton } from './CopyButton.tsx';
import { Icon, type IconName } from './Icon.tsx';

/** What will appear here, and the command that makes it appear. */
export function EmptyState({ icon, title, children, command }: { icon: IconName; title: string; children: ReactNode; command?: string }) {
  return (
    <div className="empty-state">
      <div className="empty-state__icon">
        <Icon name={icon} size={28} />
      </div>
      <h3 className="empty-state__title">{title}</h3>
      <div className="empty-state__body">{children}</div>
      {command && <CommandLine command={command} />}
    </div>
  );
}

export function CommandLine({ command }: { command: string }) {
  return (
    <div className="command-line">
      <Icon name="terminal" size={16} />
      <code>{command}</code>
      <CopyButton value={command} label="command" />
    </div>
  );
}
