// A small hand-written SVG line chart: panels stacked over one time axis,
// one line per series, a shaded band for the fault. No chart library: the
// report is a Markdown file with an image next to it, readable on GitHub.

export interface Line {
  label: string;
  color: string;
  /** [x, y]; y null for a gap. */
  points: Array<[number, number | null]>;
  dashed?: boolean;
}

export interface Panel {
  title: string;
  /** Log10 scale (latencies spanning milliseconds to seconds). */
  log?: boolean;
  lines: Line[];
}

export interface Chart {
  title: string;
  xLabel: string;
  /** The fault, on the x axis. */
  band?: [number, number];
  bandLabel?: string;
  panels: Panel[];
}

const width = 900;
const panelHeight = 170;
const left = 70;
const right = 20;
const top = 50;
const gap = 42;

const escape = (text: string): string =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** Round tick steps: 1, 2 or 5 times a power of ten, about `count` of them. */
function ticks(min: number, max: number, count = 5): number[] {
  if (!(max > min)) return [min];
  const raw = (max - min) / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw) ?? raw;
  const out: number[] = [];
  for (let value = Math.ceil(min / step) * step; value <= max + step * 1e-9; value += step) out.push(Number(value.toPrecision(12)));
  return out;
}

const shortNumber = (value: number): string => {
  const abs = Math.abs(value);
  if (abs >= 1e6) return `${Number((value / 1e6).toPrecision(3))}M`;
  if (abs >= 1e3) return `${Number((value / 1e3).toPrecision(3))}k`;
  return `${Number(value.toPrecision(3))}`;
};

export function renderChart(chart: Chart): string {
  const plotWidth = width - left - right;
  const height = top + chart.panels.length * (panelHeight + gap) + 30;
  const xs = chart.panels.flatMap((panel) => panel.lines.flatMap((line) => line.points.map(([x]) => x)));
  const xMin = Math.min(...xs, chart.band?.[0] ?? Infinity);
  const xMax = Math.max(...xs, chart.band?.[1] ?? -Infinity);
  const xScale = (x: number): number => left + ((x - xMin) / Math.max(1e-9, xMax - xMin)) * plotWidth;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ` +
    'font-family="Helvetica, Arial, sans-serif" font-size="11">');
  out.push(`<rect width="${width}" height="${height}" fill="white"/>`);
  out.push(`<text x="${left}" y="20" font-size="14" font-weight="bold">${escape(chart.title)}</text>`);
  // The legend: every distinct label once, in the order the lines come.
  const legend = new Map<string, Line>();
  for (const panel of chart.panels) for (const line of panel.lines) if (!legend.has(line.label)) legend.set(line.label, line);
  let legendX = left;
  for (const line of legend.values()) {
    out.push(`<line x1="${legendX}" y1="34" x2="${legendX + 18}" y2="34" stroke="${line.color}" stroke-width="2"${line.dashed ? ' stroke-dasharray="4 3"' : ''}/>`);
    out.push(`<text x="${legendX + 22}" y="38">${escape(line.label)}</text>`);
    legendX += 30 + line.label.length * 6;
  }

  chart.panels.forEach((panel, index) => {
    const y0 = top + index * (panelHeight + gap) + 18;
    const values = panel.lines.flatMap((line) => line.points.map(([, y]) => y)).filter((y): y is number => y !== null && Number.isFinite(y));
    const positive = values.filter((y) => y > 0);
    let yScale: (y: number) => number;
    let yTicks: number[];
    if (panel.log) {
      const low = 10 ** Math.floor(Math.log10(Math.min(...positive, 1)));
      const high = 10 ** Math.ceil(Math.log10(Math.max(...positive, low * 10)));
      yScale = (y) => y0 + panelHeight - ((Math.log10(Math.max(y, low)) - Math.log10(low)) / (Math.log10(high) - Math.log10(low))) * panelHeight;
      yTicks = [];
      for (let tick = low; tick <= high * 1.0001; tick *= 10) yTicks.push(tick);
    } else {
      const high = Math.max(...values, 1) * 1.05;
      yScale = (y) => y0 + panelHeight - (y / high) * panelHeight;
      yTicks = ticks(0, high);
    }
    out.push(`<text x="${left}" y="${y0 - 6}" font-weight="bold">${escape(panel.title)}</text>`);
    if (chart.band) {
      const [a, b] = chart.band;
      out.push(`<rect x="${xScale(a).toFixed(1)}" y="${y0}" width="${Math.max(1, xScale(b) - xScale(a)).toFixed(1)}" height="${panelHeight}" fill="#f3d9d9"/>`);
      if (index === 0 && chart.bandLabel) {
        out.push(`<text x="${(xScale(a) + 3).toFixed(1)}" y="${y0 + 12}" fill="#a33">${escape(chart.bandLabel)}</text>`);
      }
    }
    out.push(`<rect x="${left}" y="${y0}" width="${plotWidth}" height="${panelHeight}" fill="none" stroke="#999"/>`);
    for (const tick of yTicks) {
      const y = yScale(tick);
      out.push(`<line x1="${left}" y1="${y.toFixed(1)}" x2="${left + plotWidth}" y2="${y.toFixed(1)}" stroke="#e5e5e5"/>`);
      out.push(`<text x="${left - 6}" y="${(y + 4).toFixed(1)}" text-anchor="end">${shortNumber(tick)}</text>`);
    }
    for (const tick of ticks(xMin, xMax, 10)) {
      const x = xScale(tick);
      out.push(`<line x1="${x.toFixed(1)}" y1="${y0 + panelHeight}" x2="${x.toFixed(1)}" y2="${y0 + panelHeight + 4}" stroke="#999"/>`);
      out.push(`<text x="${x.toFixed(1)}" y="${y0 + panelHeight + 16}" text-anchor="middle">${shortNumber(tick)}</text>`);
    }
    for (const line of panel.lines) {
      // One polyline per run of points without a gap.
      let run: string[] = [];
      const flush = (): void => {
        if (run.length > 1) {
          out.push(`<polyline fill="none" stroke="${line.color}" stroke-width="1.5"${line.dashed ? ' stroke-dasharray="4 3"' : ''} points="${run.join(' ')}"/>`);
        } else if (run.length === 1) {
          const [x, y] = run[0]!.split(',');
          out.push(`<circle cx="${x}" cy="${y}" r="1.5" fill="${line.color}"/>`);
        }
        run = [];
      };
      for (const [x, y] of line.points) {
        if (y === null || !Number.isFinite(y) || (panel.log && y <= 0)) {
          flush();
          continue;
        }
        run.push(`${xScale(x).toFixed(1)},${yScale(y).toFixed(1)}`);
      }
      flush();
    }
  });
  out.push(`<text x="${left + plotWidth / 2}" y="${height - 6}" text-anchor="middle">${escape(chart.xLabel)}</text>`);
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
