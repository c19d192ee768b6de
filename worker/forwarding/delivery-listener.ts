// The forwarder's one LISTEN wharf_delivery connection: a stored, released,
// reaped or replayed delivery, and a destination resumed, notify it after
// their commit. A lost connection is replaced with backoff; meanwhile the
// forward loop's poll keeps finding work, and each new connection wakes the
// loop once (what was stored while nobody listened).
import type pg from 'pg';
import type { Logger } from 'pino';
import { classOf } from '../classify.js';

const firstReconnectDelay = 100;
const maxReconnectDelay = 5_000;

export class DeliveryListener {
  private client: pg.PoolClient | undefined;
  private stopped = false;
  private reconnectDelay = firstReconnectDelay;
  private reconnectTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: { pool: pg.Pool; logger: Logger; onNotification: () => void }) {}

  async start(): Promise<void> {
    await this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    const client = this.client;
    this.client = undefined;
    if (!client) return;
    client.removeAllListeners('notification');
    try {
      await client.query('UNLISTEN *');
      client.release();
    } catch (error) {
      client.release(error instanceof Error ? error : true);
    }
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    let client: pg.PoolClient | undefined;
    try {
      client = await this.options.pool.connect();
      const held = client;
      held.on('error', (error) => this.lost(held, error));
      held.on('notification', (message) => {
        if (message.channel === 'wharf_delivery') this.options.onNotification();
      });
      await held.query('LISTEN wharf_delivery');
      if (this.stopped) {
        held.release();
        return;
      }
      this.client = held;
      this.reconnectDelay = firstReconnectDelay;
      this.options.onNotification();
    } catch (error) {
      if (client) this.lost(client, error);
      else this.scheduleReconnect(error);
    }
  }

  private lost(client: pg.PoolClient, error: unknown): void {
    if (this.stopped) return;
    if (this.client !== undefined && client !== this.client) return;
    this.client = undefined;
    client.removeAllListeners('notification');
    try {
      client.release(error instanceof Error ? error : true);
    } catch {
      // released already
    }
    this.scheduleReconnect(error);
  }

  private scheduleReconnect(error: unknown): void {
    if (this.stopped || this.reconnectTimer) return;
    // Once per loss, at info: the host's event listener, on the same database, says its loss at warn.
    const log = this.reconnectDelay === firstReconnectDelay ? 'info' : 'debug';
    this.options.logger[log]({ error_class: classOf(error), retry_in_ms: this.reconnectDelay }, 'forwarding\'s LISTEN wharf_delivery connection lost; reconnecting');
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      void this.connect();
    }, this.reconnectDelay);
    this.reconnectDelay = Math.min(maxReconnectDelay, this.reconnectDelay * 2);
  }
}
