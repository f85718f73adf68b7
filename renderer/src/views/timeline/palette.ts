/**
 * The merge view's colours, taken from the shell's CSS variables (so light and dark themes follow), resolved to
 * RGBA once per theme: the canvas writes pixels directly and cannot use CSS colours per pixel.
 */
export type Rgba = [number, number, number, number];

export interface Palette {
  background: Rgba;
  prompt: Rgba;
  environment: Rgba;
  generated: Rgba;
  /** A joined call's prefix that the timeline already holds (not processed again when merged). */
  reused: Rgba;
  /** CSS colours for the overlays drawn with the 2D API. */
  css: { text: string; muted: string; focus: string; border: string; surface: string };
}

/** Any CSS colour → RGBA, by letting a 1×1 canvas paint it. */
function resolveColour(probe: CanvasRenderingContext2D, css: string): Rgba {
  probe.clearRect(0, 0, 1, 1);
  probe.fillStyle = '#000';
  probe.fillStyle = css;
  probe.fillRect(0, 0, 1, 1);
  const [r, g, b, a] = probe.getImageData(0, 0, 1, 1).data;
  return [r, g, b, a];
}

/** `a` over `b` with weight `t` for `a` (0–1), opaque result. */
export function mix(a: Rgba, b: Rgba, t: number): Rgba {
  return [
    Math.round(a[0] * t + b[0] * (1 - t)),
    Math.round(a[1] * t + b[1] * (1 - t)),
    Math.round(a[2] * t + b[2] * (1 - t)),
    255,
  ];
}

/** RGBA as one little-endian 32-bit pixel of an ImageData buffer. */
export function packRgba([r, g, b, a]: Rgba): number {
  return ((a << 24) | (b << 16) | (g << 8) | r) >>> 0;
}

export function readPalette(element: Element): Palette {
  const style = getComputedStyle(element);
  const css = (name: string, fallback: string) => style.getPropertyValue(name).trim() || fallback;
  const probe = document.createElement('canvas').getContext('2d', { willReadFrequently: true });
  if (!probe) throw new Error('2D canvas is not available');
  const surface = resolveColour(probe, css('--surface', '#ffffff'));
  const border = resolveColour(probe, css('--border-strong', '#c9cfd8'));
  const warn = resolveColour(probe, css('--warn', '#8a5a00'));
  const accent = resolveColour(probe, css('--accent', '#5140e0'));
  return {
    background: surface,
    prompt: border,
    environment: mix(warn, surface, 0.55),
    generated: accent,
    reused: mix(border, surface, 0.5),
    css: {
      text: css('--text', '#171a20'),
      muted: css('--text-muted', '#525b69'),
      focus: css('--focus', '#2f6fe4'),
      border: css('--border', '#dfe3e9'),
      surface: css('--surface', '#ffffff'),
    },
  };
}
