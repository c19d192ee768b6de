// The events filter: a GET form, so a filtered list is a link one can share.
import { eventStates } from '../../api/params.js';
import type { FormValues } from '../filters.js';

export function FilterForm(props: { action: string; values: FormValues; withState: boolean }) {
  const v = props.values;
  return (
    <form method="get" action={props.action} class="filters" role="search" aria-label="Filter events">
      {props.withState && (
        <label>
          State
          <select name="state">
            <option value="">any</option>
            {eventStates.map((state) => <option value={state} selected={v.state?.toUpperCase() === state}>{state}</option>)}
          </select>
        </label>
      )}
      <label>Provider<input name="provider" value={v.provider ?? ''} placeholder="github" /></label>
      <label>Event type<input name="event_type" value={v.event_type ?? ''} placeholder="push" /></label>
      <label>Subject<input name="subject" value={v.subject ?? ''} placeholder="repo:acme/api" /></label>
      <label>Received from (UTC)<input type="datetime-local" step="1" name="received_after" value={v.received_after ?? ''} /></label>
      <label>Received before (UTC)<input type="datetime-local" step="1" name="received_before" value={v.received_before ?? ''} /></label>
      <label class="search">Payload contains (JSON)
        <input type="search" name="payload" value={v.payload ?? ''} placeholder='{"repository": {"full_name": "acme/api"}}' spellcheck={false} />
      </label>
      <label class="search">Headers contain (JSON)
        <input type="search" name="headers" value={v.headers ?? ''} placeholder='{"x-github-event": "push"}' spellcheck={false} />
      </label>
      <button type="submit">Filter</button>
      <a href={props.action}>Clear</a>
    </form>
  );
}
