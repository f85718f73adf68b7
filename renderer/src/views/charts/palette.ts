/**
 * Colours for overlaid runs (compare views): eight CSS variables defined in charts.css, distinct in hue and
 * lightness, with a lighter set for the dark theme. Past eight they repeat (a compare view shows at most eight).
 */
export const COMPARE_COLOURS = ['--chart-1', '--chart-2', '--chart-3', '--chart-4', '--chart-5', '--chart-6', '--chart-7', '--chart-8'] as const;

/** The colour (a CSS variable name) for the `index`-th run of a comparison. */
export function compareColour(index: number): string {
  const i = Number.isInteger(index) && index >= 0 ? index : 0;
  return COMPARE_COLOURS[i % COMPARE_COLOURS.length];
}

/** A CSS variable name (`--accent`) resolved against `element`, or the colour itself. */
export function cssColour(element: Element, colour: string): string {
  return colour.startsWith('--') ? getComputedStyle(element).getPropertyValue(colour).trim() || FALLBACK_COLOUR : colour;
}

/** What an undefined variable draws as: visible on both themes. */
export const FALLBACK_COLOUR = '#888888';
