// The provider_event row as claim returns it (bigint columns arrive as text).
// claimedColumns names the same columns for the claim's SELECT list.
export interface ProviderEventRow {
  id: string;
  workspace_id: string | null;
  provider: string;
  delivery_key: string;
  event_type: string;
  subject: string | null;
  scope_key: string;
  source: string;
  connection_id: string | null;
  payload: unknown;
  headers: Record<string, string>;
  received_at: Date;
  attempt: number;
  failures: number;
  lease_epoch: string;
  /** Drawn at random by the claim; step and fence present it. */
  lease_token: string;
  replayed_at: Date | null;
}

/** Names one lease: every write after the claim acts only under its epoch. */
export interface Lease {
  id: string;
  epoch: string;
}

/** A lease as its handler holds it: steps and fences also present its token. */
export interface LeaseWithToken extends Lease {
  token: string;
}

/** The columns of ProviderEventRow, as the claim selects them. */
export const claimedColumns = 'id, workspace_id, provider, delivery_key, event_type, subject, scope_key, source, '
  + 'connection_id, payload, headers, received_at, attempt, failures, lease_epoch, lease_token, replayed_at';
