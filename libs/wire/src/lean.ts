/**
 * `@sandstream/wire/lean`: the wire without zod, for the agent's single executable. Every module
 * here is free of schemas (none builds one at load), so the agent's start-up heap holds no zod
 * object; what needs a schema (a step the fast decoders are not sure of) loads the full entry on
 * first use (docs/benchmarks.md, "Idle agent memory, part 3"). lean.test.ts keeps it zod-free.
 * Types are imported from the full entry: a type import loads nothing.
 */
export * from './agent-process-env.js';
export * from './code-languages.js';
export * from './command-input.js';
export * from './completion-encode.js';
export * from './error-result.js';
export * from './event-field.js';
export * from './fast-messages.js';
export * from './fast-read.js';
export * from './fast-result.js';
export * from './fast-step.js';
export * from './gnu-tar.js';
export * from './key-names.js';
export * from './limits.js';
export * from './over-limit.js';
export * from './pack-tar.js';
export * from './pool-claim-size.js';
export * from './raw-list-connection.js';
export * from './schema-major.js';
export * from './step-error-codes.js';
export * from './step-kinds.js';
export * from './terminal.js';
export * from './transfer-chunks.js';
export * from './transfer-list.js';
export * from './unpack-tar.js';
