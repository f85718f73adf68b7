/**
 * One uPlot chart: x = training step, one or more lines (and an optional shaded band). The plot is created
 * once; new steps only call setData, so thousands of points stay smooth while the run trains.
 * Colours come from the shell's CSS variables.
 */
import { useEffect, useRef } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface ChartLine {
  label: string;
  values: readonly (number | null)[];
  /** A CSS variable name (e.g. `--accent`) or colour. */
  colour: string;
  dashed?: boolean;
}

export interface LineChartProps {
  title: string;
  x: readonly number[];
  lines: readonly ChartLine[];
  /** Fills between two series (e.g. reward mean ± std). */
  band?: { lower: readonly (number | null)[]; upper: readonly (number | null)[]; colour: string };
  /** Changes whenever the data changes (cheaper than comparing arrays). */
  version: number;
  format?: (value: number) => string;
  testId?: string;
}

const HEIGHT = 180;

function cssColour(element: Element, colour: string): string {
  return colour.startsWith('--')
    ? getComputedStyle(element).getPropertyValue(colour).trim() || '#888'
    : colour;
}

export function LineChart({ title, x, lines, band, version, format, testId }: LineChartProps) {
  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const shape = `${lines.map((l) => l.label).join('|')}|${band ? 'band' : ''}`;

  // Build the plot when its shape changes (series added or removed); data updates go through setData below.
  useEffect(() => {
    const element = host.current;
    if (!element) return;
    const text = cssColour(element, '--text-muted');
    const grid = cssColour(element, '--border');
    const series: uPlot.Series[] = [{ label: 'step' }];
    const bands: uPlot.Band[] = [];
    if (band) {
      const fill = cssColour(element, band.colour);
      series.push(
        { label: 'mean − std', stroke: 'transparent', points: { show: false } },
        { label: 'mean + std', stroke: 'transparent', points: { show: false } },
      );
      bands.push({ series: [2, 1], fill: `color-mix(in srgb, ${fill} 18%, transparent)` });
    }
    for (const line of lines) {
      series.push({
        label: line.label,
        stroke: cssColour(element, line.colour),
        width: 1.5,
        dash: line.dashed ? [5, 4] : undefined,
        points: { show: false },
        spanGaps: true,
        value: (_u, v) => (v === null ? '—' : format ? format(v) : v.toPrecision(4)),
      });
    }
    const axis = {
      stroke: text,
      grid: { stroke: grid, width: 1 },
      ticks: { stroke: grid, width: 1 },
      font: '11px system-ui, sans-serif',
    };
    const options: uPlot.Options = {
      width: Math.max(200, element.clientWidth),
      height: HEIGHT,
      series,
      bands,
      legend: { show: true, live: true },
      cursor: { drag: { x: true, y: false } },
      scales: { x: { time: false } },
      axes: [
        axis,
        { ...axis, size: 56, values: format ? (_u, values) => values.map((v) => format(v)) : undefined },
      ],
    };
    const created = new uPlot(options, [[], ...series.slice(1).map(() => [])], element);
    plot.current = created;
    const observer = new ResizeObserver(() =>
      created.setSize({ width: Math.max(200, element.clientWidth), height: HEIGHT }),
    );
    observer.observe(element);
    return () => {
      observer.disconnect();
      created.destroy();
      plot.current = null;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps -- rebuilt only when the set of series changes (shape); data flows through setData
  }, [shape]);

  useEffect(() => {
    const columns: (readonly (number | null)[])[] = [x];
    if (band) columns.push(band.lower, band.upper);
    for (const line of lines) columns.push(line.values);
    plot.current?.setData(columns as uPlot.AlignedData);
    // eslint-disable-next-line react-hooks/exhaustive-deps -- `version` stands for the data arrays
  }, [version, shape]);

  return (
    <figure className="chart" data-testid={testId}>
      <figcaption className="chart__title">{title}</figcaption>
      <div ref={host} className="chart__plot" role="img" aria-label={`${title} by training step`} />
    </figure>
  );
}
