import type { SandboxRecord } from '@sandstream/bus';

/** Something a proxied exchange holds open: a client socket, a WebSocket pair. */
export interface Closable {
  close(): void;
}

/** How often the sandboxes with open proxied connections are checked. */
const CHECK_MS = 1000;

/**
 * The proxied connections open per sandbox, closed when it stops being ready: a container that
 * is removed takes its address with it, and a connection to it would otherwise hang (no reset
 * comes from an address that no longer exists). One read per sandbox per second, only while it
 * has connections open on this replica.
 */
export class PreviewConnections {
  private readonly open = new Map<string, Set<Closable>>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly read: (id: string) => Promise<SandboxRecord | null>) {}

  /** Holds `conn` under the sandbox until it ends (the returned function) or the sandbox closes. */
  add(sandboxId: string, conn: Closable): () => void {
    let set = this.open.get(sandboxId);
    if (!set) {
      set = new Set();
      this.open.set(sandboxId, set);
    }
    set.add(conn);
    this.timer ??= setInterval(() => void this.check(), CHECK_MS).unref();
    return () => {
      const held = this.open.get(sandboxId);
      held?.delete(conn);
      if (held?.size === 0) this.open.delete(sandboxId);
      if (this.open.size === 0) this.stop();
    };
  }

  private async check(): Promise<void> {
    await Promise.all(
      [...this.open.keys()].map(async (id) => {
        const record = await this.read(id).catch(() => undefined);
        // Unknown (Redis did not answer): left open, checked again next time.
        if (record === undefined || record?.state === 'ready') return;
        const held = this.open.get(id);
        this.open.delete(id);
        for (const conn of held ?? []) conn.close();
      }),
    );
    if (this.open.size === 0) this.stop();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  closeAll(): void {
    for (const set of this.open.values()) for (const conn of set) conn.close();
    this.open.clear();
    this.stop();
  }
}
