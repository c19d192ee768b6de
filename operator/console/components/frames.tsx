// Where a failure was thrown in the application's code, innermost first, as
// wharf.fail took them (`path:line:column function`): never a message, so
// they can be shown to anyone who may see the event.
export function Frames(props: { frames: readonly string[]; label: string }) {
  if (props.frames.length === 0) return <>—</>;
  return (
    <ol class="frames" aria-label={props.label}>
      {props.frames.map((frame) => <li><code>{frame}</code></li>)}
    </ol>
  );
}
