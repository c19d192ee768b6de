// A destination delivery as wharf.claim_deliveries hands it out: the lease
// (id, epoch), the request's parts, and the destination's sealed secrets,
// which the forwarder opens with the key ring (db/secret-box.ts).

/** bigint columns arrive as text (pg's int8), like every id and epoch of the worker. */
export interface ClaimedDelivery {
  delivery_id: string;
  epoch: string;
  attempt: number;
  event_id: string;
  destination_id: string;
  url: string;
  timeout_ms: number;
  /** Sealed (`aes256gcm:…`) under the owner {destinationId}. */
  signing_secret: string;
  /** Sealed; set while a rotation's overlap lasts. */
  previous_signing_secret: string | null;
  /** Sealed JSON: {type: 'bearer', token} | {type: 'basic', username, password} | {type: 'header', name, value}. */
  credentials: string | null;
  /** The destination's non-secret headers, an object of strings. */
  extra_headers: Record<string, string> | null;
  provider: string;
  event_type: string;
  subject: string;
  delivery_key: string | null;
  /** The provider's kept (non-secret) headers, lower-case names. */
  event_headers: Record<string, string> | null;
  /** The stored payload text, sent as it is. */
  payload: string;
  received_at: Date;
  /** A delivery sent to find out whether a destination whose breaker is open answers again. */
  probe: boolean;
  /** Claimed for a free slot, to be sent at once: every delivery of a rate-limited destination, and a probe. */
  send_now: boolean;
}

/** The lease of one delivery: every write names both. */
export interface DeliveryLease {
  id: string;
  epoch: string;
}

export const deliveryColumns = [
  'delivery_id', 'epoch', 'attempt', 'event_id', 'destination_id', 'url', 'timeout_ms', 'signing_secret',
  'previous_signing_secret', 'credentials', 'extra_headers', 'provider', 'event_type', 'subject', 'delivery_key',
  'event_headers', 'payload', 'received_at', 'probe', 'send_now',
].join(', ');
