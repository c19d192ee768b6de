// A JSON value as a tree that folds: every object and array is a <details>
// (open to the third level), keys and values coloured by kind. JSX escapes
// every text, so a payload holding markup shows as text and never runs; no
// script is needed to fold. The text of the tree reads as the JSON it shows.
import type { Child } from 'hono/jsx';

function Leaf(props: { value: unknown }) {
  const value = props.value;
  const kind = value === null ? 'null' : typeof value === 'string' ? 'string' : typeof value === 'number' ? 'number'
    : typeof value === 'boolean' ? 'boolean' : 'other';
  return <span class={`j-${kind}`}>{JSON.stringify(value)}</span>;
}

function Node(props: { value: unknown; name?: string; depth: number; last: boolean }): Child {
  const { value, depth } = props;
  const label = props.name === undefined ? null : <><span class="j-key">{JSON.stringify(props.name)}</span>{': '}</>;
  const comma = props.last ? '' : ',';
  if (typeof value !== 'object' || value === null) {
    return <div class="j-row">{label}<Leaf value={value} />{comma}</div>;
  }
  const entries: [string | undefined, unknown][] = Array.isArray(value)
    ? value.map((item) => [undefined, item])
    : Object.entries(value as Record<string, unknown>);
  const [open, close] = Array.isArray(value) ? ['[', ']'] : ['{', '}'];
  if (entries.length === 0) return <div class="j-row">{label}{open}{close}{comma}</div>;
  const count = Array.isArray(value) ? `${entries.length} item${entries.length === 1 ? '' : 's'}` : `${entries.length} key${entries.length === 1 ? '' : 's'}`;
  return (
    <details class="j-node" open={depth < 3}>
      <summary>{label}{open}<span class="j-count" aria-hidden="true">{` ${count} `}</span></summary>
      <div class="j-children">
        {entries.map(([key, item], index) => <Node value={item} name={key} depth={depth + 1} last={index === entries.length - 1} />)}
      </div>
      <div class="j-row">{close}{comma}</div>
    </details>
  );
}

export function JsonBlock(props: { value: unknown; label: string }) {
  return (
    <div class="json" role="group" tabindex={0} aria-label={props.label}>
      <Node value={props.value} depth={0} last={true} />
    </div>
  );
}
