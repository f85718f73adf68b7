import { describe, expect, it } from 'vitest';
import { lineChartSvg } from './svg-chart.ts';

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
    const coords = [...svg.matchAll(/points="([^"]+)"/g)].flatMap((m) => m[1].split(' ').map((p) => p.split(',').map(Number)));
    for (const [x, y] of coords) {
      expect(x).toBeGreaterThanOrEqual(0);
      expect(x).toBeLessThanOrEqual(400);
      expect(y).toBeGreaterThanOrEqual(0);
      expect(y).toBeLessThanOrEqual(200);
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
});
