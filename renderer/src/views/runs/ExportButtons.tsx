/** Downloads of a run: its steps as CSV or JSONL, and the episodes it trained on as JSONL. */
import { useState } from 'react';
import type { RunSummary } from '../../../../swarm/common/runs-api.ts';
import { queryString } from '../../api/client.ts';
import { describeError } from '../../api/errors.ts';
import { pageClient } from '../../api/page-client.ts';

interface ExportFile {
  id: string;
  label: string;
  path: string;
  fileName: string;
}

function exportFiles(run: RunSummary): ExportFile[] {
  const id = encodeURIComponent(run.id);
  // The run's episodes: the model's, created from its start until the model's next run began.
  const episodes = queryString({ model: run.model, createdFrom: run.episodeWindow.from, createdBefore: run.episodeWindow.before });
  return [
    { id: 'steps-csv', label: 'Steps (CSV)', path: `/runs/${id}/steps.csv`, fileName: `${run.name}-steps.csv` },
    { id: 'steps-jsonl', label: 'Steps (JSONL)', path: `/runs/${id}/steps.jsonl`, fileName: `${run.name}-steps.jsonl` },
    { id: 'episodes-jsonl', label: 'Episodes (JSONL)', path: `/episodes.jsonl${episodes}`, fileName: `${run.name}-episodes.jsonl` },
  ];
}

export function ExportButtons({ run }: { run: RunSummary }) {
  const [busy, setBusy] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const save = async (file: ExportFile) => {
    setBusy(file.id);
    setError(null);
    try {
      await pageClient().download(file.path, file.fileName);
    } catch (e) {
      setError(describeError(e));
    } finally {
      setBusy(null);
    }
  };
  return (
    <div className="stack run-export">
      <div className="toolbar" role="group" aria-label="Export the run">
        {exportFiles(run).map((file) => (
          <button
            key={file.id}
            type="button"
            className="button"
            data-testid={`run-export-${file.id}`}
            disabled={busy !== null}
            aria-label={`Export ${run.name}: ${file.label}`}
            onClick={() => void save(file)}
          >
            {busy === file.id ? 'Exporting…' : file.label}
          </button>
        ))}
      </div>
      {error && (
        <p className="alert" role="alert">
          Export failed: {error}
        </p>
      )}
    </div>
  );
}
