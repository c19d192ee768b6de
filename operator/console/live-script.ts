// The live lists' script: every few seconds, while the tab is visible, it
// fetches the page's own URL again (filters included) and swaps the content
// of each element marked data-live for the fresh one, so that rows appear
// and change without a reload and without losing the filters, the scroll
// position or the keyboard focus (a region holding the focus waits for the
// next turn). It runs only with the page's CSP nonce; without script, the
// page is the same, only still.
export const liveEveryMs = 3_000;

export const liveScript = `
(() => {
  // The script comes before the regions it updates: they are looked up at each turn.
  const regions = () => Array.from(document.querySelectorAll('[data-live]'));
  const tick = async () => {
    const status = document.getElementById('live-status');
    if (!document.hidden && regions().length > 0) {
      try {
        const response = await fetch(location.href, { headers: { 'x-wharf-live': '1' }, credentials: 'same-origin' });
        if (response.ok && response.headers.get('content-type')?.startsWith('text/html')) {
          const fresh = new DOMParser().parseFromString(await response.text(), 'text/html');
          for (const region of regions()) {
            const next = fresh.getElementById(region.id);
            if (!next || region.contains(document.activeElement)) continue;
            if (next.innerHTML !== region.innerHTML) region.innerHTML = next.innerHTML;
          }
          if (status) status.textContent = 'Live: updated ' + new Date().toLocaleTimeString();
        }
      } catch (error) { /* a failed poll is tried again at the next turn */ }
    }
    setTimeout(tick, ${liveEveryMs});
  };
  setTimeout(tick, ${liveEveryMs});
})();
`;
