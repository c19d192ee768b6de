// The one script of the console: on a running bulk replay's page, it polls the
// progress as JSON every second, moves the <progress> bar and the status text,
// and reloads the page once the replay is finished or cancelled. It runs only with the
// page's CSP nonce; without script, a <noscript> meta refresh does the same.
export const progressScript = `
(() => {
  const bar = document.getElementById('bulk-progress');
  const status = document.getElementById('bulk-status');
  if (!bar || !status) return;
  const tick = async () => {
    try {
      const response = await fetch(bar.dataset.poll, { headers: { accept: 'application/json' } });
      if (response.ok) {
        const p = await response.json();
        bar.max = Math.max(p.matched, 1);
        bar.value = p.matched === 0 ? (p.state !== 'running' ? 1 : 0) : p.replayed + p.skipped;
        status.textContent = 'Replayed ' + p.replayed + ' of ' + p.matched + ' matched (' + p.skipped + ' skipped), ' + p.state + '.';
        if (p.state !== 'running') { location.reload(); return; }
      }
    } catch (error) { /* a failed poll is retried at the next tick */ }
    setTimeout(tick, 1000);
  };
  setTimeout(tick, 1000);
})();
`;
