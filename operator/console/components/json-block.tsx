// A JSON value, pretty-printed in a <pre>. JSX escapes the text, so a payload
// holding markup shows as text and never runs.
export function JsonBlock(props: { value: unknown; label: string }) {
  return <pre tabindex={0} aria-label={props.label}><code>{JSON.stringify(props.value, null, 2)}</code></pre>;
}
