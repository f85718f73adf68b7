/** The hovered token: its text (whitespace made visible), id, role, logprob and call. */
import { useAppStore } from '../../store/index.ts';
import { TOKEN_KIND_LABELS, tokenAt, type MergeLayout } from '../../store/timeline/layout.ts';
import { visibleText } from './draw.ts';

const TOOLTIP_OFFSET = 14;
const TOOLTIP_WIDTH = 260;

export function TokenTooltip({ layout }: { layout: MergeLayout }) {
  const hover = useAppStore((s) => s.timeline.hover);
  if (!hover) return null;
  const row = layout.rows[hover.rowIndex];
  const token = row ? tokenAt(layout, row, hover.position) : null;
  if (!token) return null;
  // Beside the pointer, flipped to its left near the window's right edge.
  const left =
    hover.clientX + TOOLTIP_OFFSET + TOOLTIP_WIDTH > window.innerWidth
      ? hover.clientX - TOOLTIP_OFFSET - TOOLTIP_WIDTH
      : hover.clientX + TOOLTIP_OFFSET;
  return (
    <div
      className="token-tooltip"
      role="tooltip"
      data-testid="token-tooltip"
      style={{ left, top: hover.clientY + TOOLTIP_OFFSET, width: TOOLTIP_WIDTH }}
    >
      <div className="token-tooltip__text mono">{visibleText(token.text) || '∅'}</div>
      <dl>
        <dt>id</dt>
        <dd className="mono" data-testid="token-id">
          {token.tokenId}
        </dd>
        <dt>position</dt>
        <dd className="mono" data-testid="token-position">
          {token.position}
        </dd>
        <dt>role</dt>
        <dd>
          {token.reused
            ? `${TOKEN_KIND_LABELS[token.kind]} (already in the timeline)`
            : TOKEN_KIND_LABELS[token.kind]}
        </dd>
        {token.logprob !== null && (
          <>
            <dt>logprob</dt>
            <dd className="mono">
              {token.logprob.toFixed(3)} (p = {Math.exp(token.logprob).toFixed(3)})
            </dd>
          </>
        )}
        {token.callId && (
          <>
            <dt>call</dt>
            <dd className="mono">{token.callId}</dd>
          </>
        )}
      </dl>
    </div>
  );
}
