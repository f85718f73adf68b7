/** Drop an agent script here (or choose one with the keyboard): the attach form fills in below. */
import { useRef, useState, type DragEvent } from 'react';
import { Icon } from '../../components/Icon.tsx';
import { appStore } from '../../store/index.ts';
import { SCRIPT_EXTENSIONS } from '../../../../swarm/common/script-extensions.ts';
import { readDroppedScript } from './read-dropped.ts';

export function DropZone() {
  const input = useRef<HTMLInputElement>(null);
  const [over, setOver] = useState(false);
  const [error, setError] = useState<string | null>(null);

  async function take(file: File | undefined) {
    if (!file) return;
    try {
      appStore.getState().scriptDropped(await readDroppedScript(file));
      setError(null);
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  }

  function onDrop(event: DragEvent) {
    event.preventDefault();
    setOver(false);
    void take(event.dataTransfer.files[0]);
  }

  return (
    <div
      className="drop-zone"
      data-over={over || undefined}
      data-testid="drop-zone"
      onDragOver={(e) => {
        e.preventDefault();
        setOver(true);
      }}
      onDragLeave={() => setOver(false)}
      onDrop={onDrop}
    >
      <Icon name="clients" size={26} />
      <div>
        <strong>Drop an agent script to attach it</strong>
        <div className="muted small">
          {SCRIPT_EXTENSIONS.join(' ')} — any OpenAI-compatible client. Dropping a new version under the same
          name hot-swaps it without stopping training.
        </div>
      </div>
      <button type="button" className="button" onClick={() => input.current?.click()}>
        Choose a file…
      </button>
      <input
        ref={input}
        type="file"
        className="visually-hidden"
        accept={SCRIPT_EXTENSIONS.join(',')}
        data-testid="script-input"
        aria-label="Agent script file"
        tabIndex={-1}
        onChange={(e) => {
          void take(e.target.files?.[0]);
          e.target.value = '';
        }}
      />
      {error && (
        <p className="drop-zone__error error-text" role="alert">
          {error}
        </p>
      )}
    </div>
  );
}
