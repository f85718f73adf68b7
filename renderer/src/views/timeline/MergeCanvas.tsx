/**
 * The token canvas of the merge view. Zoom, pan, hover and scrolling redraw through the store's `subscribe`
 * (no React render per frame); the canvas stays in view while the rows scroll beside it.
 * Mouse: wheel scrolls rows, Ctrl/⌘+wheel zooms at the pointer, Shift+wheel or drag pans.
 * Keys (when focused): ←/→ pan, +/− zoom, 0 fits the episode, ↑/↓ choose the previous/next call.
 */
import { useEffect, useRef, type KeyboardEvent, type PointerEvent, type RefObject } from 'react';
import { appStore, useAppStore } from '../../store/index.ts';
import {
  clampViewport,
  fitViewport,
  panViewport,
  rowAtY,
  tokenAtX,
  zoomViewport,
  type MergeLayout,
  type Viewport,
} from '../../store/timeline/layout.ts';
import { timelineSelectors } from '../../store/timeline/selectors.ts';
import { drawMergeView } from './draw.ts';
import { readPalette, type Palette } from './palette.ts';

/** One key press or wheel notch zooms by this factor. */
export const ZOOM_STEP = 1.5;
/** One arrow key press pans by this share of the visible width. */
const PAN_SHARE = 0.2;

export function MergeCanvas({
  layout,
  scrollRef,
}: {
  layout: MergeLayout;
  scrollRef: RefObject<HTMLDivElement | null>;
}) {
  const canvasRef = useRef<HTMLCanvasElement>(null);
  const wrapRef = useRef<HTMLDivElement>(null);
  const size = useRef({ width: 0, height: 0 });
  const palette = useRef<Palette | null>(null);
  const frame = useRef(0);
  const drag = useRef<{ x: number; viewport: Viewport } | null>(null);
  const label = useAppStore((s) => canvasLabel(s.timeline.viewport, layout));

  useEffect(() => {
    const canvas = canvasRef.current;
    const wrap = wrapRef.current;
    const scroller = scrollRef.current;
    if (!canvas || !wrap || !scroller) return;
    const ctx = canvas.getContext('2d');
    if (!ctx) return;

    const paint = () => {
      frame.current = 0;
      const { width, height } = size.current;
      const { viewport, selectedCallId, hover } = appStore.getState().timeline;
      if (!viewport || width === 0 || height === 0) return;
      palette.current ??= readPalette(canvas);
      const started = performance.now();
      drawMergeView(ctx, {
        layout,
        viewport,
        width,
        height,
        scrollTop: scroller.scrollTop,
        dpr: window.devicePixelRatio || 1,
        palette: palette.current,
        selectedCallId,
        hover,
      });
      // Frames drawn and the last one's cost, for tests and the UI benchmark (bench/ui.ts) to wait on and read.
      canvas.dataset.paints = String(Number(canvas.dataset.paints ?? 0) + 1);
      canvas.dataset.drawMs = (performance.now() - started).toFixed(2);
    };
    const schedule = () => {
      frame.current ||= requestAnimationFrame(paint);
    };

    const resize = () => {
      const width = wrap.clientWidth;
      const height = Math.min(scroller.clientHeight, layout.height);
      const dpr = window.devicePixelRatio || 1;
      size.current = { width, height };
      canvas.width = Math.round(width * dpr);
      canvas.height = Math.round(height * dpr);
      canvas.style.width = `${width}px`;
      canvas.style.height = `${height}px`;
      const { viewport } = appStore.getState().timeline;
      appStore
        .getState()
        .timelineViewportChanged(
          viewport ? clampViewport(viewport, layout.maxTokens, width) : fitViewport(layout.maxTokens, width),
        );
      paint();
    };
    const observer = new ResizeObserver(resize);
    observer.observe(wrap);
    observer.observe(scroller);

    const unsubscribe = appStore.subscribe((state, previous) => {
      const now = state.timeline;
      const before = previous.timeline;
      if (
        now.viewport !== before.viewport ||
        now.hover !== before.hover ||
        now.selectedCallId !== before.selectedCallId
      )
        schedule();
    });
    const theme = window.matchMedia('(prefers-color-scheme: dark)');
    const onTheme = () => {
      palette.current = null;
      schedule();
    };
    theme.addEventListener('change', onTheme);
    scroller.addEventListener('scroll', schedule, { passive: true });

    // Wheel must be non-passive to keep Ctrl+wheel from zooming the page.
    const onWheel = (event: WheelEvent) => {
      const { viewport } = appStore.getState().timeline;
      if (!viewport) return;
      const width = size.current.width;
      if (event.ctrlKey || event.metaKey) {
        event.preventDefault();
        const x = event.clientX - canvas.getBoundingClientRect().left;
        appStore
          .getState()
          .timelineViewportChanged(
            zoomViewport(viewport, Math.pow(ZOOM_STEP, -event.deltaY / 100), x, layout.maxTokens, width),
          );
      } else if (event.shiftKey || Math.abs(event.deltaX) > Math.abs(event.deltaY)) {
        event.preventDefault();
        appStore
          .getState()
          .timelineViewportChanged(
            panViewport(viewport, event.deltaX || event.deltaY, layout.maxTokens, width),
          );
      }
    };
    canvas.addEventListener('wheel', onWheel, { passive: false });

    return () => {
      observer.disconnect();
      unsubscribe();
      theme.removeEventListener('change', onTheme);
      scroller.removeEventListener('scroll', schedule);
      canvas.removeEventListener('wheel', onWheel);
      cancelAnimationFrame(frame.current);
      frame.current = 0;
    };
  }, [layout, scrollRef]);

  function hoverAt(clientX: number, clientY: number) {
    const canvas = canvasRef.current;
    const scroller = scrollRef.current;
    const { viewport, hover } = appStore.getState().timeline;
    if (!canvas || !scroller || !viewport) return;
    const rect = canvas.getBoundingClientRect();
    const x = clientX - rect.left;
    const y = clientY - rect.top;
    const row = rowAtY(layout, y + scroller.scrollTop);
    const rowIndex = row ? layout.rows.indexOf(row) : -1;
    const position = tokenAtX(viewport, x);
    if (rowIndex === -1) {
      if (hover) appStore.getState().timelineHovered(null);
      return;
    }
    if (hover && hover.rowIndex === rowIndex && hover.position === position) return;
    appStore.getState().timelineHovered({ rowIndex, position, clientX, clientY });
  }

  function onPointerMove(event: PointerEvent<HTMLCanvasElement>) {
    const start = drag.current;
    if (start) {
      appStore
        .getState()
        .timelineViewportChanged(
          panViewport(start.viewport, start.x - event.clientX, layout.maxTokens, size.current.width),
        );
      return;
    }
    hoverAt(event.clientX, event.clientY);
  }

  function onPointerDown(event: PointerEvent<HTMLCanvasElement>) {
    const { viewport } = appStore.getState().timeline;
    if (!viewport || event.button !== 0) return;
    drag.current = { x: event.clientX, viewport };
    event.currentTarget.setPointerCapture(event.pointerId);
  }

  function onPointerUp(event: PointerEvent<HTMLCanvasElement>) {
    const start = drag.current;
    drag.current = null;
    if (start && Math.abs(start.x - event.clientX) < 3) selectCallAt(event.clientY);
  }

  function selectCallAt(clientY: number) {
    const canvas = canvasRef.current;
    const scroller = scrollRef.current;
    if (!canvas || !scroller) return;
    const row = rowAtY(layout, clientY - canvas.getBoundingClientRect().top + scroller.scrollTop);
    if (row?.type === 'call') appStore.getState().timelineCallSelected(row.call.callId);
  }

  function onKeyDown(event: KeyboardEvent<HTMLCanvasElement>) {
    const state = appStore.getState();
    const { viewport } = state.timeline;
    if (!viewport) return;
    const width = size.current.width;
    const set = state.timelineViewportChanged;
    const pan = width * PAN_SHARE;
    const actions: Record<string, () => void> = {
      ArrowLeft: () => set(panViewport(viewport, -pan, layout.maxTokens, width)),
      ArrowRight: () => set(panViewport(viewport, pan, layout.maxTokens, width)),
      '+': () => set(zoomViewport(viewport, ZOOM_STEP, width / 2, layout.maxTokens, width)),
      '=': () => set(zoomViewport(viewport, ZOOM_STEP, width / 2, layout.maxTokens, width)),
      '-': () => set(zoomViewport(viewport, 1 / ZOOM_STEP, width / 2, layout.maxTokens, width)),
      '0': () => set(fitViewport(layout.maxTokens, width)),
      ArrowDown: () => state.timelineCallSelected(timelineSelectors.stepCall(state.timeline, 1)),
      ArrowUp: () => state.timelineCallSelected(timelineSelectors.stepCall(state.timeline, -1)),
      Home: () => set(clampViewport({ ...viewport, firstToken: 0 }, layout.maxTokens, width)),
      End: () => set(clampViewport({ ...viewport, firstToken: layout.maxTokens }, layout.maxTokens, width)),
    };
    const action = actions[event.key];
    if (!action) return;
    event.preventDefault();
    action();
  }

  return (
    <div className="merge-canvas" ref={wrapRef}>
      <canvas
        ref={canvasRef}
        className="merge-canvas__canvas"
        data-testid="merge-canvas"
        tabIndex={0}
        role="img"
        aria-label={label}
        aria-describedby="merge-keys"
        onPointerMove={onPointerMove}
        onPointerDown={onPointerDown}
        onPointerUp={onPointerUp}
        onPointerLeave={() => appStore.getState().timelineHovered(null)}
        onKeyDown={onKeyDown}
      />
    </div>
  );
}

function canvasLabel(viewport: Viewport | null, layout: MergeLayout): string {
  const calls = `${layout.calls.length} calls in ${layout.lanes.length} merged timelines`;
  if (!viewport) return calls;
  return `${calls}; showing from token ${Math.floor(viewport.firstToken)} at ${viewport.pxPerToken >= 1 ? `${viewport.pxPerToken.toFixed(1)} px per token` : `${(1 / viewport.pxPerToken).toFixed(0)} tokens per px`}`;
}
