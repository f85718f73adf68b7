import { describe, expect, it } from 'vitest';
import { estimateTextWidth, lineChartSvg, wrapText } from './svg-chart.ts';

const attr = (tag: string, name: string) => Number(new RegExp(`\\s${name}="([^"]+)"`).exec(tag)![1]);

function plotArea(svg: string) {
  const tag = /<rect data-role="plot-area"[^>]*>/.exec(svg)![0];
  const x = attr(tag, 'x');
  const y = attr(tag, 'y');
  return { x, y, right: x + attr(tag, 'width'), bottom: y + attr(tag, 'height') };
}

const svgSize = (svg: string) => {
  const tag = /<svg[^>]*>/.exec(svg)![0];
  return { width: attr(tag, 'width'), height: attr(tag, 'height') };
};

describe('lineChartSvg', () => {
  it('draws one polyline per series with its legend, inside the canvas', () => {
    const svg = lineChartSvg(
      [
        { name: 'reward', points: [0, 1, 2, 3].map((x) => ({ x, y: x * 0.2 })) },
        { name: 'success', points: [0, 1, 2, 3].map((x) => ({ x, y: 1 - x * 0.1 })) },
      ],
      { title: 'Learning <curve>', xLabel: 'step', yLabel: 'value', width: 400, height: 200 },
    );
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg.match(/<polyline/g)).toHaveLength(2);
    expect(svg).toContain('>reward<');
    expect(svg).toContain('Learning &lt;curve&gt;');
    const { width, height } = svgSize(svg);
    const coords = [...svg.matchAll(/ points="([^"]+)"/g)].flatMap((m) => m[1].split(' ').map((p) => p.split(',').map(Number)));
    for (const [x, y] of coords) {
      expect(x).toBeGreaterThanOrEqual(0);
      expect(x).toBeLessThanOrEqual(width);
      expect(y).toBeGreaterThanOrEqual(0);
      expect(y).toBeLessThanOrEqual(height);
    }
  });

  it('skips non-finite points instead of writing NaN into the SVG', () => {
    const svg = lineChartSvg([{ name: 'kl', points: [{ x: 0, y: NaN }, { x: 1, y: 0.1 }, { x: 2, y: 0.2 }] }], {
      title: 'kl',
      xLabel: 'step',
      yLabel: 'kl',
    });
    expect(svg).not.toContain('NaN');
  });

  it('lays the legend out below the plot area, never over it', () => {
    const series = Array.from({ length: 7 }, (_, i) => ({
      name: `a fairly long series name number ${i}`,
      points: [0, 1, 2].map((x) => ({ x, y: x + i })),
    }));
    const svg = lineChartSvg(series, { title: 't', xLabel: 'step', yLabel: 'v', width: 360 });
    const plot = plotArea(svg);
    const items = [...svg.matchAll(/<g data-role="legend-item" data-y="([^"]+)">/g)].map((m) => Number(m[1]));
    expect(items).toHaveLength(7);
    for (const y of items) expect(y).toBeGreaterThan(plot.bottom);
    expect(Math.max(...items)).toBeLessThan(svgSize(svg).height);
  });

  it('wraps a long title instead of cutting it', () => {
    const title = 'LLM calls per train episode (the agent’s tool use: 1 = answered at once) over the whole run';
    const width = 320;
    const svg = lineChartSvg([{ name: 'calls', points: [{ x: 1, y: 1 }, { x: 2, y: 2 }] }], { title, xLabel: 'step', yLabel: 'calls', width });
    const titleTag = /<text data-role="title"[^>]*font-size="(\d+)"[^>]*>(.*?)<\/text>/.exec(svg)!;
    const fontSize = Number(titleTag[1]);
    const lines = [...titleTag[2].matchAll(/<tspan[^>]*>([^<]*)<\/tspan>/g)].map((m) => m[1].replace(/&apos;/g, "'"));
    expect(lines.length).toBeGreaterThan(1);
    expect(lines.join(' ')).toBe(title);
    for (const line of lines) expect(12 + estimateTextWidth(line, fontSize)).toBeLessThanOrEqual(width);
    expect(plotArea(svg).y).toBeGreaterThan(lines.length * fontSize);
  });

  it('draws labelled point markers and vertical event markers', () => {
    const svg = lineChartSvg([{ name: 'success', points: [1, 2, 3, 4].map((x) => ({ x, y: x / 5 })) }], {
      title: 'Success',
      xLabel: 'step',
      yLabel: 'rate',
      yDomain: [0, 1],
      format: 'percent',
      markers: [
        { x: 1, y: 0.1, label: 'held-out before' },
        { x: 4, y: 0.7, label: 'held-out after' },
      ],
      events: [{ x: 2, label: 'checkpoint' }, { x: 2, label: 'hot swap' }],
    });
    expect(svg.match(/data-role="marker"/g)).toHaveLength(2);
    expect(svg).toContain('held-out before');
    expect(svg).toContain('held-out after');
    expect(svg.match(/data-role="event"/g)).toHaveLength(2);
    expect(svg).toContain('>checkpoint<');
    expect(svg).toContain('>100%<');
    expect(svg).not.toMatch(/\.0+%</);
  });

  it('writes integer x ticks only', () => {
    const svg = lineChartSvg([{ name: 'loss', points: [1, 2, 3].map((x) => ({ x, y: 1 / x })) }], { title: 'loss', xLabel: 'step', yLabel: 'loss' });
    const plot = plotArea(svg);
    const xTicks = [...svg.matchAll(/<text x="[^"]+" y="([^"]+)" text-anchor="middle" fill="#4b5563">([^<]+)</g)]
      .filter((m) => Number(m[1]) > plot.bottom)
      .map((m) => m[2]);
    expect(xTicks.length).toBeGreaterThan(1);
    for (const t of xTicks) expect(Number.isInteger(Number(t))).toBe(true);
  });

  it('keeps a band within an explicit y domain', () => {
    const svg = lineChartSvg(
      [{ name: 'reward', points: [0, 1, 2].map((x) => ({ x, y: 0.9 })), band: [0, 1, 2].map((x) => ({ x, low: 0.6, high: 1.3 })) }],
      { title: 'r', xLabel: 'step', yLabel: 'r', yDomain: [0, 1] },
    );
    const plot = plotArea(svg);
    const polygon = /<polygon points="([^"]+)"/.exec(svg)![1];
    for (const [, y] of polygon.split(' ').map((p) => p.split(',').map(Number))) expect(y).toBeGreaterThanOrEqual(plot.y);
  });

  it('draws sane axes on constant data and a single point', () => {
    const svg = lineChartSvg([{ name: 'kl', points: [{ x: 0, y: 0 }] }], { title: 'kl', xLabel: 'step', yLabel: 'kl' });
    expect(svg).not.toContain('NaN');
    expect(svg).not.toMatch(/>-\d/);
    expect(svg).toContain('<circle');
  });
});

describe('wrapText', () => {
  it('keeps every word and splits a word longer than a line', () => {
    const lines = wrapText('a verylongwordthatcannotfit b', 60, 10);
    expect(lines.join('').replace(/\s/g, '')).toBe('averylongwordthatcannotfitb');
    expect(lines.length).toBeGreaterThan(2);
    for (const line of lines) expect(estimateTextWidth(line, 10)).toBeLessThanOrEqual(60);
  });
});
