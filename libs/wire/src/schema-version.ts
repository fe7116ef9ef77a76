import * as z from 'zod';

/**
 * The protocol's schema version. Messages carry an integer major version; a reader accepts
 * every major it knows and answers anything else with an error result instead of guessing.
 * Minor additions never bump the major: new fields are optional and unknown fields are ignored.
 */
export const SCHEMA_VERSION = 1 as const;
export const SUPPORTED_SCHEMA_MAJORS: readonly number[] = [1];

export const SchemaVersionSchema = z
  .number({ error: 'schemaVersion must be a number' })
  .int('schemaVersion must be an integer major version')
  .refine((v) => SUPPORTED_SCHEMA_MAJORS.includes(v), {
    error: (issue) =>
      `unsupported schemaVersion ${String(issue.input)}: this reader understands ${SUPPORTED_SCHEMA_MAJORS.join(', ')}`,
  });
