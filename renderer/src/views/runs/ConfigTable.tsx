/** A run's resolved configuration, every key as a dot path; keys changed from the defaults highlighted. */
import { useMemo } from 'react';
import { configRows } from '../../store/runs/config.ts';

export function ConfigTable({ config, changedFromDefaults }: { config: Record<string, unknown>; changedFromDefaults: readonly string[] }) {
  const rows = useMemo(() => configRows(config, changedFromDefaults), [config, changedFromDefaults]);
  return (
    <div className="table-wrap">
      <table className="table config-table" data-testid="run-config">
        <caption className="visually-hidden">Resolved training configuration; changed from the defaults: {changedFromDefaults.length} keys</caption>
        <thead>
          <tr>
            <th scope="col">Key</th>
            <th scope="col">Value</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr key={row.key} data-key={row.key} data-changed={row.highlighted || undefined} className={row.highlighted ? 'config-row--changed' : undefined}>
              <th scope="row" className="mono">
                {row.key}
                {row.highlighted && <span className="state-tag config-tag">changed</span>}
              </th>
              <td className="mono">{row.value}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
