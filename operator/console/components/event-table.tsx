// A page of events as a table: each row links to the event's own page, and
// the rows are reached and opened with the keyboard (row-keys-script.ts).
import type { EventSummary } from '../../sql/operator.js';
import { StateBadge, Time } from '../layout.js';
import { rowFocus, rowKeysHint } from '../row-keys-script.js';

export function EventTable(props: { events: EventSummary[]; base: string; caption: string }) {
  if (props.events.length === 0) return <p role="status">No events match.</p>;
  return (
    <table data-rows>
      <caption class="visually-hidden">{`${props.caption}. ${rowKeysHint}`}</caption>
      <thead>
        <tr>
          <th scope="col" class="num">Id</th>
          <th scope="col">State</th>
          <th scope="col">Provider</th>
          <th scope="col">Event type</th>
          <th scope="col">Subject</th>
          <th scope="col">Received</th>
          <th scope="col" class="num">Attempt</th>
          <th scope="col">Error class</th>
        </tr>
      </thead>
      <tbody>
        {props.events.map((event, index) => (
          <tr {...rowFocus(index)}>
            <th scope="row" class="num"><a href={`${props.base}/events/${event.id}`}>{String(event.id)}</a></th>
            <td><StateBadge state={event.state} />{event.outcome ? ` (${event.outcome})` : ''}</td>
            <td>{event.provider}</td>
            <td>{event.event_type}</td>
            <td>{event.subject ?? '—'}</td>
            <td><Time at={event.received_at} /></td>
            <td class="num">{String(event.attempt)}</td>
            <td>{event.error_class ?? '—'}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
