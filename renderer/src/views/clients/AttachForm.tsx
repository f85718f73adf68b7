/** The short form after a drop: name, tasks, model, repeat, concurrency, weight — then Attach (or Hot-swap). */
import { useId, useState, type FormEvent } from 'react';
import { appStore, useAppStore } from '../../store/index.ts';
import { attachDraft } from '../../store/clients/loaders.ts';
import { clientsSelectors } from '../../store/clients/selectors.ts';
import { apiRequest } from '../../api/page-client.ts';

export function AttachForm() {
  const draft = useAppStore((s) => s.clients.draft);
  const attaching = useAppStore((s) => s.clients.attaching);
  const error = useAppStore((s) => s.clients.attachError);
  const notice = useAppStore((s) => s.clients.attachNotice);
  const hotSwap = useAppStore((s) => clientsSelectors.isHotSwap(s.clients));
  const currentVersion = useAppStore(
    (s) => s.clients.list.find((c) => c.name === s.clients.draft.name)?.version ?? 0,
  );
  const models = useAppStore((s) => s.swarm.status?.models);
  const change = appStore.getState().attachDraftChanged;
  const [tasksError, setTasksError] = useState<string | null>(null);
  const id = useId();

  // The only model hosted is the obvious choice.
  const model = draft.model || (models?.length === 1 ? models[0].name : '');

  function submit(event: FormEvent) {
    event.preventDefault();
    if (model !== draft.model) change({ model });
    void attachDraft(appStore, apiRequest());
  }

  async function takeTasks(file: File | undefined) {
    if (!file) return;
    try {
      const tasks = clientsSelectors.parseTaskLines(await file.text());
      change({ inlineTasks: tasks, inlineTasksName: file.name });
      setTasksError(null);
    } catch (err) {
      setTasksError(err instanceof Error ? err.message : String(err));
    }
  }

  if (!draft.script) {
    return notice ? (
      <p className="notice" role="status" data-testid="attach-notice">
        {notice}
      </p>
    ) : null;
  }
  const script = draft.script;
  return (
    <form
      className="attach-form"
      onSubmit={submit}
      aria-label="Attach the dropped script"
      data-testid="attach-form"
    >
      <p className="attach-form__file">
        <strong className="mono">{script.filename}</strong>{' '}
        <span className="muted small">
          {'path' in script
            ? script.path
            : `${script.content.length.toLocaleString('en')} characters, uploaded to the peer`}
        </span>
        {hotSwap && (
          <span className="state-tag" data-state="active">
            replaces v{currentVersion}
          </span>
        )}
      </p>
      <div className="toolbar">
        <label className="field">
          <span className="field__label">Name</span>
          <input
            className="input"
            value={draft.name}
            onChange={(e) => change({ name: e.target.value })}
            required
            pattern="[A-Za-z0-9][A-Za-z0-9._\-]{0,63}"
            data-testid="attach-name"
          />
        </label>
        <label className="field">
          <span className="field__label">Model</span>
          <select
            className="select"
            value={model}
            onChange={(e) => change({ model: e.target.value })}
            required
            data-testid="attach-model"
          >
            <option value="">Choose…</option>
            {models?.map((m) => (
              <option key={m.name}>{m.name}</option>
            ))}
          </select>
        </label>
        <label className="field">
          <span className="field__label">Task file (path on the peer)</span>
          <input
            className="input input--wide mono"
            value={
              draft.inlineTasks
                ? `${draft.inlineTasksName} (uploaded, ${draft.inlineTasks.length} tasks)`
                : draft.tasksPath
            }
            onChange={(e) => change({ tasksPath: e.target.value, inlineTasks: null, inlineTasksName: null })}
            placeholder="examples/tasks/arith.jsonl"
            data-testid="attach-tasks"
          />
        </label>
        <label className="field">
          <span className="field__label">…or upload</span>
          <input
            id={`${id}-tasks`}
            type="file"
            accept=".jsonl,.json,.txt"
            className="input input--file"
            onChange={(e) => void takeTasks(e.target.files?.[0])}
            data-testid="attach-tasks-file"
          />
        </label>
        <NumberField
          label="Repeat (group size)"
          value={draft.repeat}
          min={1}
          max={1024}
          onChange={(repeat) => change({ repeat })}
        />
        <NumberField
          label="Concurrency"
          value={draft.concurrency}
          min={1}
          max={1024}
          onChange={(concurrency) => change({ concurrency })}
        />
        <NumberField
          label="Weight"
          value={draft.weight}
          min={0.01}
          max={1000}
          step="any"
          onChange={(weight) => change({ weight })}
        />
        <button
          type="submit"
          className="button button--primary"
          disabled={attaching}
          data-testid="attach-submit"
        >
          {attaching ? 'Attaching…' : hotSwap ? `Hot-swap to v${currentVersion + 1}` : 'Attach'}
        </button>
        <button type="button" className="button" onClick={() => change({ script: null })}>
          Cancel
        </button>
      </div>
      {(error || tasksError) && (
        <p className="alert" role="alert" data-testid="attach-error">
          {error ?? tasksError}
        </p>
      )}
    </form>
  );
}

function NumberField({
  label,
  value,
  min,
  max,
  step = 1,
  onChange,
}: {
  label: string;
  value: number;
  min: number;
  max: number;
  step?: number | 'any';
  onChange: (n: number) => void;
}) {
  return (
    <label className="field">
      <span className="field__label">{label}</span>
      <input
        className="input input--narrow mono"
        type="number"
        value={value}
        min={min}
        max={max}
        step={step}
        onChange={(e) => onChange(Number(e.target.value))}
      />
    </label>
  );
}
