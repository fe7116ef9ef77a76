import type { SandboxHost } from './sandbox-host.js';

/**
 * The sandboxes one MCP connection created: closed when the connection ends (stdin closed, the
 * HTTP session deleted or expired), except those created with `keep: true`. A model that loses
 * its connection would otherwise leave them running until their idle limit.
 */
export class SandboxSession {
  private readonly created = new Map<string, { keep: boolean }>();
  private closed = false;

  constructor(private readonly host: SandboxHost) {}

  add(sandboxId: string, keep: boolean): void {
    this.created.set(sandboxId, { keep });
  }

  /** Whether this connection created it (list_sandboxes says so). */
  has(sandboxId: string): boolean {
    return this.created.has(sandboxId);
  }

  forget(sandboxId: string): void {
    this.created.delete(sandboxId);
  }

  /** How many sandboxes end() would close: those created and not kept. */
  pending(): number {
    return [...this.created.values()].filter((c) => !c.keep).length;
  }

  /** Closes the sandboxes it created and did not keep; once. Failures are told, not thrown. */
  async end(onError: (sandboxId: string, err: unknown) => void = () => {}): Promise<string[]> {
    if (this.closed) return [];
    this.closed = true;
    const ids = [...this.created].filter(([, c]) => !c.keep).map(([id]) => id);
    this.created.clear();
    await Promise.all(
      ids.map((id) =>
        this.host.close(id).then(
          () => {},
          (err) => onError(id, err),
        ),
      ),
    );
    return ids;
  }
}
