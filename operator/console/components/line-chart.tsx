// A line chart drawn on the server as inline SVG (no client library, nothing
// to load): one polyline per series over the minutes (or hours). The SVG is
// an image with a title and a description that says in words what it shows,
// printed under it too (the dashboard adds the numbers as a table).

export interface Series {
  name: string;
  values: number[];
}

const width = 640;
const height = 200;
const pad = { left: 52, right: 12, top: 12, bottom: 28 };
const colors = ['#0969da', '#1a7f37'];

/** HH:MM in UTC. */
export function clock(at: string): string {
  return new Date(at).toISOString().slice(11, 16);
}

/** MM-DD HH:MM in UTC: a time of a chart that spans days. */
export function dayClock(at: string): string {
  return new Date(at).toISOString().slice(5, 16).replace('T', ' ');
}

/** A round upper bound for the y axis: 1, 2, 5 × 10^n. */
function niceMax(value: number): number {
  if (value <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((step) => step * power).find((bound) => bound >= value) ?? value;
}

/** In words: each series' latest value, peak and total (when totals mean something). */
export function summarize(series: Series[], minutes: string[], unit: string, totals: boolean, time = clock): string {
  if (minutes.length === 0) return 'No data.';
  const span = `from ${time(minutes[0]!)} to ${time(minutes.at(-1)!)} UTC`;
  const parts = series.map((one) => {
    let peak = 0;
    let peakAt = 0;
    one.values.forEach((value, i) => {
      if (value > peak) [peak, peakAt] = [value, i];
    });
    const total = one.values.reduce((sum, value) => sum + value, 0);
    const latest = one.values.at(-1) ?? 0;
    return `${one.name}: latest ${latest} ${unit}, peak ${peak}${peak > 0 ? ` at ${time(minutes[peakAt]!)}` : ''}`
      + (totals ? `, ${total} in all` : '');
  });
  return `${parts.join('; ')} (${span}).`;
}

export function LineChart(props: {
  id: string; title: string; unit: string; minutes: string[]; series: Series[]; totals: boolean;
  /** How a time is written: clock (the default) or dayClock. */
  time?: (at: string) => string;
}) {
  const { minutes, series } = props;
  const time = props.time ?? clock;
  const max = niceMax(Math.max(0, ...series.flatMap((one) => one.values)));
  const plotWidth = width - pad.left - pad.right;
  const plotHeight = height - pad.top - pad.bottom;
  const x = (i: number) => pad.left + (minutes.length <= 1 ? 0 : (i * plotWidth) / (minutes.length - 1));
  const y = (value: number) => pad.top + plotHeight - (value / max) * plotHeight;
  const summary = summarize(series, minutes, props.unit, props.totals, time);
  return (
    <figure class="chart" aria-labelledby={`${props.id}-caption`}>
      <figcaption id={`${props.id}-caption`}>{props.title}</figcaption>
      <div class="legend" aria-hidden="true">
        {series.map((one, i) => <span><span class={`swatch swatch-${i}`}></span>{one.name}</span>)}
      </div>
      <svg viewBox={`0 0 ${width} ${height}`} role="img" aria-labelledby={`${props.id}-title ${props.id}-desc`}>
        <title id={`${props.id}-title`}>{props.title}</title>
        <desc id={`${props.id}-desc`}>{summary}</desc>
        {[0, 0.5, 1].map((share) => (
          <g>
            <line x1={pad.left} x2={width - pad.right} y1={y(max * share)} y2={y(max * share)} stroke="#d0d7de" stroke-width="1" />
            <text x={pad.left - 6} y={y(max * share) + 4} text-anchor="end" font-size="11" fill="#57606a">
              {String(Number.isInteger(max * share) ? max * share : (max * share).toFixed(1))}
            </text>
          </g>
        ))}
        {minutes.length > 0 && (
          <>
            <text x={pad.left} y={height - 8} font-size="11" fill="#57606a">{time(minutes[0]!)}</text>
            <text x={width - pad.right} y={height - 8} font-size="11" fill="#57606a" text-anchor="end">{`${time(minutes.at(-1)!)} UTC`}</text>
          </>
        )}
        {series.map((one, i) => (
          <polyline fill="none" stroke={colors[i % colors.length]} stroke-width="2" stroke-linejoin="round"
            points={one.values.map((value, index) => `${x(index).toFixed(1)},${y(value).toFixed(1)}`).join(' ')} />
        ))}
      </svg>
      <p class="summary" aria-hidden="true">{summary}</p>
    </figure>
  );
}
