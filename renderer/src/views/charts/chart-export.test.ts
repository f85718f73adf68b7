import { describe, expect, it } from 'vitest';
import { chartFileName, runChartSvg } from './chart-export.ts';
import { compareColour, COMPARE_COLOURS } from './palette.ts';
import { markerStyle, markersNear } from './markers.ts';

const resolve = (colour: string) => (colour.startsWith('--') ? '#123456' : colour);

describe('runChartSvg', () => {
  const input = {
    title: 'Reward',
    series: [{ key: 'a', label: 'run a', x: [1, 2, 3], y: [0.1, 0.5, 0.3], colour: '--chart-1' }],
    markers: [{ x: 2, kind: 'checkpoint', label: 'checkpoint 2' }],
    smoothing: 0.6,
  };

  it('draws the smoothed line with the raw one faint behind, and the markers', () => {
    const svg = runChartSvg(input, resolve);
    expect(svg.match(/<polyline/g)).toHaveLength(2);
    expect(svg).toContain('stroke-opacity');
    expect(svg).toContain('#123456');
    expect(svg).toContain('checkpoint 2');
    expect(svg.match(/data-role="legend-item"/g)).toHaveLength(1);
  });

  it('draws the raw line alone without smoothing', () => {
    const svg = runChartSvg({ ...input, smoothing: 0 }, resolve);
    expect(svg.match(/<polyline/g)).toHaveLength(1);
    expect(svg).not.toContain('stroke-opacity');
  });
});

describe('chartFileName', () => {
  it('makes a file name from a title', () => {
    expect(chartFileName('Reward mean (train)', 'png')).toBe('reward-mean-train.png');
    expect(chartFileName('∑∑', 'svg')).toBe('chart.svg');
  });
});

describe('compareColour', () => {
  it('gives eight distinct colours, then repeats', () => {
    const colours = Array.from({ length: 8 }, (_, i) => compareColour(i));
    expect(new Set(colours).size).toBe(8);
    expect(compareColour(8)).toBe(compareColour(0));
    expect(compareColour(-1)).toBe(COMPARE_COLOURS[0]);
  });
});

describe('markers', () => {
  it('styles every kind and finds the markers near a step, nearest first', () => {
    for (const kind of ['start', 'resume', 'config-change', 'checkpoint', 'hot-swap', 'revert', 'stop', 'finish', 'fail']) {
      expect(markerStyle(kind).glyph.length).toBeGreaterThan(0);
    }
    expect(markerStyle('something-new').glyph).toBeTruthy();
    const markers = [
      { x: 10, kind: 'checkpoint', label: 'c' },
      { x: 12, kind: 'hot-swap', label: 'h' },
      { x: 40, kind: 'fail', label: 'f' },
    ];
    expect(markersNear(markers, 11.6, 2).map((m) => m.label)).toEqual(['h', 'c']);
    expect(markersNear(markers, 25, 2)).toEqual([]);
  });
});
