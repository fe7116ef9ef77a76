/**
 * Every number the agent and the in-process sandbox enforce. One table, so that the agent,
 * the backends and the services refuse the same inputs with the same words.
 */
export const Limits = {
  /** readFile: files above this size are refused, not truncated. */
  readFileMaxBytes: 1024 * 1024,
  /** writeFile: content above this size (decoded bytes) is refused. */
  writeFileMaxBytes: 10 * 1024 * 1024,
  /** run: a step's stdin above this size (decoded bytes) is refused. */
  runStdinMaxBytes: 8 * 1024 * 1024,
  /** listFiles: entries returned at most; the result says when it was cut. */
  listFilesMaxEntries: 1000,
  /** listFiles: the deepest maxDepth a step may ask for. */
  listFilesMaxDepth: 32,
  /** grep: matches returned when the step does not say. */
  grepDefaultMaxMatches: 200,
  /** grep: the most matches a step may ask for. */
  grepMaxMatches: 10_000,
  /** grep: a matching line longer than this is cut (the match itself is kept in `text`). */
  grepMaxLineChars: 2000,
  /**
   * A raw wire message (Step or control) larger than this is refused before parsing. A job's
   * steps are measured against it at submit, as the dispatcher will serialise them.
   */
  messageMaxBytes: 16 * 1024 * 1024,
  /**
   * A job spec's string with no tighter limit of its own (a run step's argument, an environment
   * name or value), in UTF-8 bytes: Linux refuses a single argument or environment string past
   * 128 KiB (MAX_ARG_STRLEN) anyway, so a longer one could only fail later, inside the sandbox.
   */
  stringMaxBytes: 128 * 1024,
  /** A whole job spec as stored in Redis (JSON, UTF-8): refused at submit beyond this. */
  jobSpecMaxBytes: 32 * 1024 * 1024,
  /** An output line longer than this is split into several events, so one line cannot fill memory. */
  eventLineMaxBytes: 16 * 1024,
  /** run: arguments a step may pass. */
  runMaxArgs: 10_000,
  /** run: the longest timeout a step may ask for (24 h). */
  runMaxTimeoutSeconds: 24 * 60 * 60,
  /** run: timeout when the step gives none. */
  runDefaultTimeoutSeconds: 600,
  /** upload/download: one Redis value of a tar stream in transit (never the whole tree at once). */
  transferChunkBytes: 1024 * 1024,
  /** upload/download: chunks waiting in Redis at most; the sender waits for the reader beyond. */
  transferWindowChunks: 8,
  /** upload/download: a tree larger than this is refused, unless the step allows more (up to the max). */
  transferDefaultMaxBytes: 1024 * 1024 * 1024,
  transferMaxBytes: 16 * 1024 * 1024 * 1024,
  /** upload/download: the other side silent this long fails the transfer. */
  transferIdleSeconds: 60,
  /** terminal: the largest window, either way (a 4K screen at a tiny font is ~800 columns). */
  terminalMaxCols: 1000,
  terminalMaxRows: 1000,
  /** terminal: one input message (a keystroke is a few bytes; a paste is cut into these). */
  terminalInputMaxBytes: 64 * 1024,
  /** terminal: input messages waiting for the agent; a client pushing past this is refused. */
  terminalInputMaxPending: 1000,
  /** code: one cell's source, in UTF-8 bytes. */
  codeMaxBytes: 1024 * 1024,
  /** code: a cell's results (plots, tables) together, as JSON; results past it are left out and counted. */
  codeResultsMaxBytes: 8 * 1024 * 1024,
  /** code: kernels (contexts) one sandbox keeps at most; each is a process for the sandbox's lifetime. */
  codeMaxContexts: 16,
  /** run with stdinStream: one input message (a longer write is cut into these). */
  stdinMessageMaxBytes: 64 * 1024,
  /** run with stdinStream: input messages waiting for the command; a client pushing past this is refused. */
  stdinMaxPending: 1000,
} as const;

/** Redis stream caps. */
export const StreamLimits = {
  /** `XADD … MAXLEN ~ eventStreamMaxLength` on every per-job events stream. */
  eventStreamMaxLength: 10_000,
  /** `XADD … MAXLEN ~` on a terminal's output stream: the scrollback a reattaching client gets. */
  terminalOutputMaxLength: 2_000,
  /** The shared lifecycle stream observers read. */
  lifecycleStreamMaxLength: 100_000,
} as const;

/** Soft batching of output events: whichever comes first. */
export const EventBatching = {
  maxLines: 50,
  maxDelayMs: 100,
} as const;
