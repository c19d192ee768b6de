// The host's one LISTEN connection. On wharf_event, admissions notify only
// while some listener is marked idle, and each mark buys one notification, so
// the claim loop marks it idle right before it sleeps and busy when its slots
// fill. On wharf_delivery (a host that forwards), whatever makes a
// destination's delivery claimable notifies, and the forwarder wakes. A dead
// connection is replaced; meanwhile the polls keep finding work.
import type pg from 'pg';
import type { Logger } from 'pino';
import { classOf } from './classify.js';
import { markListenerBusy, markListenerIdle } from './sql/claim-lease.js';

export interface ListenerOptions {
  pool: pg.Pool;
  /** Unique per host: names its wharf.idle_listener row. */
  name: string;
  logger: Logger;
  onNotification: () => void;
  /** A host that forwards: also LISTEN wharf_delivery, and call this on each (sql/88). */
  onDeliveryNotification?: () => void;
}

const firstReconnectDelay = 100;
const maxReconnectDelay = 5_000;

export class Listener {
  private client: pg.PoolClient | undefined;
  private idle = false;
  /** Counts notifications, so markIdle can tell one arrived while it ran. */
  private notifications = 0;
  private stopped = false;
  private reconnectDelay = firstReconnectDelay;
  private reconnectTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: ListenerOptions) {}

  /** The live LISTEN connection, when there is one: the claim loop queries on it. */
  get connection(): pg.PoolClient | undefined {
    return this.client;
  }

  get isIdle(): boolean {
    return this.idle;
  }

  async start(): Promise<void> {
    await this.connect();
  }

  /**
   * Marks this host idle: 'marked', or 'busy' while an admission is in flight
   * (claim, then try again), or 'no-listener' while the connection is down.
   */
  async markIdle(): Promise<'marked' | 'busy' | 'no-listener'> {
    const client = this.client;
    if (!client) return 'no-listener';
    const notificationsBefore = this.notifications;
    const marked = await markListenerIdle(client, this.options.name);
    // A notification that arrived with the reply consumed the new mark.
    this.idle = marked && client === this.client && this.notifications === notificationsBefore;
    if (this.idle) return 'marked';
    return client === this.client ? 'busy' : 'no-listener';
  }

  async markBusy(): Promise<void> {
    if (!this.idle) return;
    this.idle = false;
    await markListenerBusy(this.client ?? this.options.pool, this.options.name);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    const client = this.client;
    this.client = undefined;
    if (!client) return;
    try {
      await markListenerBusy(client, this.options.name);
      await client.query('UNLISTEN *');
      client.release();
    } catch (error) {
      client.release(error instanceof Error ? error : true);
    }
    this.idle = false;
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    let client: pg.PoolClient | undefined;
    try {
      client = await this.options.pool.connect();
      client.on('error', (error) => this.lost(client, error));
      client.on('notification', (message) => {
        if (message.channel === 'wharf_delivery') {
          this.options.onDeliveryNotification?.();
          return;
        }
        this.notifications += 1;
        // The notifying transaction consumed this host's idle mark
        // (wharf.notify_idle_claimers): the loop must mark it again before it
        // sleeps.
        this.idle = false;
        this.options.onNotification();
      });
      await client.query(this.options.onDeliveryNotification ? 'LISTEN wharf_event; LISTEN wharf_delivery' : 'LISTEN wharf_event');
      if (this.stopped) {
        client.release();
        return;
      }
      this.client = client;
      this.reconnectDelay = firstReconnectDelay;
      this.options.logger.debug('listening');
      // Whatever was admitted while nobody listened: look now.
      this.options.onNotification();
      this.options.onDeliveryNotification?.();
    } catch (error) {
      if (client) this.lost(client, error);
      else this.scheduleReconnect(error);
    }
  }

  private lost(client: pg.PoolClient | undefined, error: unknown): void {
    // stop() releases the client itself, also when the server is going away.
    if (this.stopped) return;
    if (!client || (client !== this.client && this.client !== undefined)) return;
    this.client = undefined;
    this.idle = false;
    client.removeAllListeners('notification');
    // Destroys the connection instead of returning it to the pool.
    try {
      client.release(error instanceof Error ? error : true);
    } catch {
      // released already
    }
    this.scheduleReconnect(error);
  }

  private scheduleReconnect(error: unknown): void {
    if (this.stopped || this.reconnectTimer) return;
    // Once per loss: the retries of one outage stay quiet.
    const log = this.reconnectDelay === firstReconnectDelay ? 'warn' : 'debug';
    this.options.logger[log]({ error_class: classOf(error), retry_in_ms: this.reconnectDelay }, 'listener connection lost; reconnecting');
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      void this.connect();
    }, this.reconnectDelay);
    this.reconnectDelay = Math.min(maxReconnectDelay, this.reconnectDelay * 2);
  }
}
