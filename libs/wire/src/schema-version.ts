import * as z from 'zod';
import { SUPPORTED_SCHEMA_MAJORS } from './schema-major.js';

export * from './schema-major.js';

/** A message's schemaVersion: one of SUPPORTED_SCHEMA_MAJORS (schema-major.ts). */
export const SchemaVersionSchema = z
  .number({ error: 'schemaVersion must be a number' })
  .int('schemaVersion must be an integer major version')
  .refine((v) => SUPPORTED_SCHEMA_MAJORS.includes(v), {
    error: (issue) =>
      `unsupported schemaVersion ${String(issue.input)}: this reader understands ${SUPPORTED_SCHEMA_MAJORS.join(', ')}`,
  });
