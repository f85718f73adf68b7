import { useEffect, useState } from 'react';
import { Icon } from './Icon.tsx';

/** How long "Copied" stays visible: long enough to read, short enough not to linger. */
const COPIED_FEEDBACK_MS = 1_500;

/** Copies `value` to the clipboard; says "Copied" (or "Copy failed") so the user knows it worked. */
export function CopyButton({ value, label }: { value: string; label: string }) {
  const [result, setResult] = useState<'idle' | 'copied' | 'failed'>('idle');

  useEffect(() => {
    if (result === 'idle') return;
    const timer = setTimeout(() => setResult('idle'), COPIED_FEEDBACK_MS);
    return () => clearTimeout(timer);
  }, [result]);

  async function copy() {
    try {
      await navigator.clipboard.writeText(value);
      setResult('copied');
    } catch {
      setResult('failed'); // clipboard blocked (insecure origin, permissions): say so instead of pretending
    }
  }

  return (
    <button type="button" className="copy-button" onClick={copy} aria-label={`Copy ${label}`} title={`Copy ${label}`}>
      <Icon name={result === 'copied' ? 'check' : 'copy'} size={15} />
      <span className="copy-button__text" aria-live="polite">
        {result === 'copied' ? 'Copied' : result === 'failed' ? 'Copy failed' : 'Copy'}
      </span>
    </button>
  );
}

/** A long machine value (peer id, join token) in monospace, selectable, with a copy button. */
export function CopyableValue({ value, label, testId }: { value: string; label: string; testId?: string }) {
  return (
    <span className="id-value">
      <code className="id-value__text" data-testid={testId} title={value}>
        {value}
      </code>
      <CopyButton value={value} label={label} />
    </span>
  );
}
