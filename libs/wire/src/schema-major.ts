/**
 * The protocol's schema version. Messages carry an integer major version; a reader accepts
 * every major it knows and answers anything else with an error result instead of guessing.
 * Minor additions never bump the major: new fields are optional and unknown fields are ignored.
 */
export const SCHEMA_VERSION = 1 as const;
export const SUPPORTED_SCHEMA_MAJORS: readonly number[] = [1];
