// Keyboard-friendly tables: a table marked data-rows has one row in the tab
// order (the first, then the last one moved to: a roving tabindex, rendered
// by rowFocus so that live updates keep it), ArrowDown/j and ArrowUp/k move
// between its rows, Home and End to the first and last, and Enter opens the
// row's first link, as a click on it would. Keys act only on a row itself,
// never on a link, button or field inside it, nor with a modifier. Focus is
// drawn (styles.ts, tbody tr[tabindex]:focus-visible). It runs only with the
// page's CSP nonce; without script, every row's link is still in the tab
// order and opens with Enter.
export const rowKeysScript = `
(() => {
  document.addEventListener('keydown', (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    const row = document.activeElement;
    if (!(row instanceof HTMLTableRowElement) || !row.matches('table[data-rows] > tbody > tr')) return;
    const rows = Array.from(row.parentElement.rows);
    const at = rows.indexOf(row);
    let next;
    switch (event.key) {
      case 'ArrowDown': case 'j': next = rows[at + 1]; break;
      case 'ArrowUp': case 'k': next = rows[at - 1]; break;
      case 'Home': next = rows[0]; break;
      case 'End': next = rows[rows.length - 1]; break;
      case 'Enter': {
        const link = row.querySelector('a[href]');
        if (link) { event.preventDefault(); link.click(); }
        return;
      }
      default: return;
    }
    event.preventDefault();
    if (!next) return;
    row.tabIndex = -1;
    next.tabIndex = 0;
    next.focus();
  });
})();
`;

/** A body row's place in the roving tab order: the first row is in it. */
export function rowFocus(index: number): { tabindex: number } {
  return { tabindex: index === 0 ? 0 : -1 };
}

/** What a keyboard table's caption adds for screen readers. */
export const rowKeysHint = 'Arrow keys or j and k move between rows; Enter opens one.';
