/**
 * The agent's environment, which every step's process inherits, as a plain object read once.
 * Reading process.env goes through a native getter per variable; done for every command it was
 * ~6 % of the agent's CPU per `exec(['true'])` (docs/benchmarks.md, "CPU per exec, part 2").
 *
 * The agent changes its own environment in two places: at start (cli.ts drops the variables
 * meant for the agent alone, before any step) and when a warm-pool claim binds it
 * (await-claim.ts), which calls environmentChanged(). Anything else that changes process.env
 * while steps run must call it too, or its change does not reach the steps.
 */
let snapshot: Readonly<Record<string, string>> | null = null;

export function agentEnvironment(): Readonly<Record<string, string>> {
  if (snapshot === null) {
    const env: Record<string, string> = {};
    // Node's spawn drops undefined values; so does the copy.
    for (const [name, value] of Object.entries(process.env)) if (value !== undefined) env[name] = value;
    snapshot = Object.freeze(env);
  }
  return snapshot;
}

/** process.env was changed: the next step reads it again. */
export function environmentChanged(): void {
  snapshot = null;
}
