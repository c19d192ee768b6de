// The console's one stylesheet, served as a file (/console/assets/console.css)
// so that the Content-Security-Policy needs no 'unsafe-inline' for styles.
export const stylesheet = `
:root { color-scheme: light dark; --fg: #1b1f24; --muted: #57606a; --line: #d0d7de; --accent: #0969da; --bad: #cf222e; --ok: #1a7f37; --warn: #9a6700; --bg: #fff; --bg-soft: #f6f8fa;
  --bad-soft: #ffebe9; --ok-soft: #dafbe1; --warn-soft: #fff8c5; --info-soft: #ddf4ff; --j-key: #953800; --j-string: #0a3069; --j-number: #0550ae; --j-lit: #8250df; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6edf3; --muted: #8d96a0; --line: #30363d; --accent: #4493f8; --bad: #f85149; --ok: #3fb950; --warn: #d29922; --bg: #0d1117; --bg-soft: #161b22;
    --bad-soft: #3c1618; --ok-soft: #12261e; --warn-soft: #2e2410; --info-soft: #0c2d4a; --j-key: #ffa657; --j-string: #a5d6ff; --j-number: #79c0ff; --j-lit: #d2a8ff; }
}
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
a { color: var(--accent); }
.skip { position: absolute; left: -999px; }
.skip:focus { left: 8px; top: 8px; background: var(--bg); padding: 4px 8px; z-index: 1; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); clip-path: inset(50%); white-space: nowrap; }
header.site { display: flex; flex-wrap: wrap; align-items: center; gap: 12px 24px; padding: 10px 20px; border-bottom: 1px solid var(--line); background: var(--bg-soft); }
header.site .brand { font-weight: 700; text-decoration: none; color: var(--fg); }
header.site nav ul { display: flex; flex-wrap: wrap; gap: 4px 16px; list-style: none; margin: 0; padding: 0; }
header.site nav a[aria-current="page"] { font-weight: 700; text-decoration: none; color: var(--fg); }
header.site nav { flex: 1; }
header.site .who { margin-left: auto; display: flex; gap: 12px; align-items: center; color: var(--muted); }
main { padding: 16px 20px 40px; max-width: 1200px; }
h1 { font-size: 1.5rem; margin: 0.3em 0 0.6em; }
h2 { font-size: 1.15rem; margin: 1.4em 0 0.5em; }
table { border-collapse: collapse; width: 100%; margin: 0.5em 0 1em; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
thead th { background: var(--bg-soft); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: var(--bg-soft); border: 1px solid var(--line); padding: 10px; overflow: auto; max-height: 420px; }
form.filters { display: flex; flex-wrap: wrap; gap: 10px 16px; align-items: flex-end; padding: 10px; border: 1px solid var(--line); background: var(--bg-soft); }
form.filters label, form.stack label { display: flex; flex-direction: column; font-size: 0.85rem; color: var(--muted); gap: 2px; }
form.stack { display: grid; gap: 10px; max-width: 420px; }
form.stack button { justify-self: start; }
form.stack label.check, form.filters label.check { flex-direction: row; align-items: center; gap: 6px; }
input, select, button { font: inherit; padding: 4px 8px; }
input, select { background: var(--bg); color: var(--fg); border: 1px solid var(--line); border-radius: 4px; }
button { cursor: pointer; border: 1px solid var(--line); background: var(--bg-soft); color: var(--fg); border-radius: 4px; }
button:focus-visible, a:focus-visible, summary:focus-visible, .json:focus-visible, input:focus-visible, select:focus-visible { outline: 2px solid var(--accent); outline-offset: 2px; }
tbody tr:hover, tbody tr:focus-within { background: var(--bg-soft); }
tbody tr[tabindex]:focus-visible { outline: 2px solid var(--accent); outline-offset: -2px; }
button.primary { background: var(--accent); color: #fff; border-color: var(--accent); }
form.inline { display: inline; }
.notice { padding: 8px 12px; border-left: 4px solid var(--ok); background: var(--ok-soft); }
.problem { padding: 8px 12px; border-left: 4px solid var(--bad); background: var(--bad-soft); }
.state, .badge { display: inline-block; font-weight: 600; font-size: 0.78rem; line-height: 1.5; padding: 0 8px; border-radius: 999px; border: 1px solid currentColor; white-space: nowrap; }
.state-DEAD, .state-SUSPENDED, .state-REVOKED, .state-BREAKER_OPEN, .badge-open, .badge-failing, .badge-failed { color: var(--bad); background: var(--bad-soft); }
.state-DONE, .state-ACTIVE, .badge-resolved { color: var(--ok); background: var(--ok-soft); }
.state-PAUSED, .state-LEASED, .badge-acknowledged, .badge-paused, .badge-leased { color: var(--warn); background: var(--warn-soft); }
.state-QUEUED, .badge-waiting { color: var(--accent); background: var(--info-soft); }
.badge-ignored, .badge-pending { color: var(--muted); background: var(--bg-soft); }
.badge-delivered { color: var(--ok); background: var(--ok-soft); }
time[title] { text-decoration: underline dotted var(--muted); text-underline-offset: 3px; cursor: help; }
p.live { font-size: 0.8rem; color: var(--muted); margin: 0.3em 0; }
.actions { display: flex; flex-wrap: wrap; gap: 6px; }
.json { font: 13px/1.5 ui-monospace, SFMono-Regular, Menlo, monospace; background: var(--bg-soft); border: 1px solid var(--line); padding: 10px; overflow: auto; max-height: 480px; }
.json details > summary { cursor: pointer; list-style: none; }
.json details > summary::before { content: "▸ "; color: var(--muted); }
.json details[open] > summary::before { content: "▾ "; }
.json details[open] > summary .j-count { display: none; }
.j-children { padding-left: 1.4em; border-left: 1px dotted var(--line); margin-left: 0.3em; }
.j-count { color: var(--muted); font-style: italic; }
.j-key { color: var(--j-key); } .j-string { color: var(--j-string); } .j-number { color: var(--j-number); } .j-boolean, .j-null { color: var(--j-lit); }
.pager { margin: 1em 0; }
.facts-line { margin: 1em 0; }
.charts { display: grid; gap: 20px; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); }
figure.chart { margin: 0; border: 1px solid var(--line); padding: 10px; }
figure.chart svg { width: 100%; height: auto; display: block; }
figure.chart figcaption { font-weight: 600; margin-bottom: 6px; }
figure.chart .summary { font-size: 0.85rem; color: var(--muted); margin: 6px 0 0; }
.legend { display: flex; gap: 16px; font-size: 0.85rem; color: var(--muted); }
.swatch { display: inline-block; width: 12px; height: 3px; vertical-align: middle; margin-right: 4px; }
.swatch-0 { background: #0969da; } .swatch-1 { background: #1a7f37; }
progress { width: 100%; max-width: 480px; height: 1.2em; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
.muted { color: var(--muted); font-weight: normal; }
ol.frames { margin: 0; padding-left: 1.5em; font-size: 0.9em; }
`;
