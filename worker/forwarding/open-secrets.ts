// Opens a claimed delivery's sealed secrets (db/secret-box.ts, owner
// {destinationId}): the signing secret, the previous one during a rotation,
// and the credentials. AES-GCM per delivery would cost more than the HMAC, so
// what was opened is kept per (destination, sealed text): a new secret is a
// new sealed text, so a rotation is never served from a stale entry.
import { decryptSecret, type KeyRing, SecretKeyError } from '../../db/secret-box.js';
import type { ClaimedDelivery } from '../sql/delivery-row.js';

export type Credentials =
  | { type: 'bearer'; token: string }
  | { type: 'basic'; username: string; password: string }
  | { type: 'header'; name: string; value: string };

export interface OpenedSecrets {
  /** The current signing secret first, then the previous one while it still signs. */
  signingSecrets: string[];
  credentials: Credentials | null;
}

const maxCached = 1_024;

export class SecretOpener {
  private readonly opened = new Map<string, Promise<string>>();

  constructor(private readonly ring: KeyRing | undefined) {}

  get hasKeyRing(): boolean {
    return this.ring !== undefined;
  }

  async open(row: ClaimedDelivery): Promise<OpenedSecrets> {
    const owner = { destinationId: row.destination_id };
    const signingSecrets = [await this.decrypt(owner, row.signing_secret)];
    if (row.previous_signing_secret) signingSecrets.push(await this.decrypt(owner, row.previous_signing_secret));
    const credentials = row.credentials ? parseCredentials(await this.decrypt(owner, row.credentials), row.destination_id) : null;
    return { signingSecrets, credentials };
  }

  private decrypt(owner: { destinationId: string }, sealed: string): Promise<string> {
    const key = `${owner.destinationId}\u0000${sealed}`;
    let opened = this.opened.get(key);
    if (!opened) {
      opened = decryptSecret(this.ring, owner, sealed);
      // A failure is not kept: the ring may be fixed by a restart only, but a
      // half-written row is not worth remembering.
      opened.catch(() => this.opened.delete(key));
      if (this.opened.size >= maxCached) this.opened.delete(this.opened.keys().next().value!);
      this.opened.set(key, opened);
    }
    return opened;
  }
}

function parseCredentials(text: string, destinationId: string): Credentials {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // The message names the destination, never the text.
    throw new SecretKeyError(`the credentials of destination ${destinationId} are not JSON`);
  }
  const record = (typeof value === 'object' && value !== null ? value : {}) as Record<string, unknown>;
  const isText = (field: unknown): field is string => typeof field === 'string';
  if (record.type === 'bearer' && isText(record.token)) return { type: 'bearer', token: record.token };
  if (record.type === 'basic' && isText(record.username) && isText(record.password)) {
    return { type: 'basic', username: record.username, password: record.password };
  }
  if (record.type === 'header' && isText(record.name) && isText(record.value)) return { type: 'header', name: record.name, value: record.value };
  throw new SecretKeyError(`the credentials of destination ${destinationId} are not bearer, basic or header credentials`);
}

/** The header the credentials add: its name (lower case) and value. */
export function credentialsHeader(credentials: Credentials): [string, string] {
  switch (credentials.type) {
    case 'bearer':
      return ['authorization', `Bearer ${credentials.token}`];
    case 'basic':
      return ['authorization', `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`, 'utf8').toString('base64')}`];
    case 'header':
      return [credentials.name.toLowerCase(), credentials.value];
  }
}

/** Every text that must never be recorded or logged: what a response that echoes the request is scrubbed of. */
export function secretTexts(opened: OpenedSecrets): string[] {
  const texts = [...opened.signingSecrets];
  for (const secret of opened.signingSecrets) texts.push(secret.replace(/^whsec_/, ''));
  const credentials = opened.credentials;
  if (credentials) {
    texts.push(credentialsHeader(credentials)[1]);
    if (credentials.type === 'bearer') texts.push(credentials.token);
    if (credentials.type === 'basic') texts.push(credentials.password);
    if (credentials.type === 'header') texts.push(credentials.value);
  }
  // Short texts would scrub ordinary words; a secret is never that short.
  return [...new Set(texts)].filter((text) => text.length >= 6).sort((a, b) => b.length - a.length);
}
