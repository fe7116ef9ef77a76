import type * as z from 'zod';

/** What one zod issue says, and about which field. */
export interface IssueText {
  path: PropertyKey[];
  message: string;
}

/**
 * The one place that words a zod issue for people (agent results, CLI and SDK errors, file
 * loaders), so every edge reports the same thing the same way.
 */
export function describeIssue(issue: z.core.$ZodIssue): IssueText {
  // zod reports unknown keys against their object; one unknown key is reported at the key itself,
  // so `steps.0.contineOnError: unknown key …` reads like any field error and a loader can point
  // at the key's line. (The message, with its "did you mean", comes from unknownKeysError.)
  if (issue.code === 'unrecognized_keys' && issue.keys.length === 1) {
    return { path: [...issue.path, ...issue.keys], message: issue.message };
  }
  // zod words a bad record key "Invalid key in record"; the key schema's own rule says why.
  if (issue.code === 'invalid_key' && issue.issues.length > 0) {
    return { path: issue.path, message: issue.issues.map((inner) => inner.message).join(', ') };
  }
  return { path: issue.path, message: issue.message };
}

/** Longest path segment shown whole: a 128 KiB key that broke a rule must not flood the line. */
const SEGMENT_MAX_CHARS = 64;

/** `steps.0.env.NAME`, with an over-long segment cut to its start. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it looks for
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;

export function formatPath(path: readonly PropertyKey[], root = ''): string {
  return (
    [root, ...path.map(String)]
      .filter((segment) => segment !== '')
      .map((segment) =>
        segment.length > SEGMENT_MAX_CHARS ? `${segment.slice(0, SEGMENT_MAX_CHARS)}…` : segment,
      )
      // A key with a control character in it (an environment name with a NUL) is shown quoted and
      // escaped, so that it reaches a terminal or a log as text.
      .map((segment) => (CONTROL_CHARACTER.test(segment) ? JSON.stringify(segment) : segment))
      .join('.')
  );
}

/**
 * One line for one broken rule, naming the field path, so that an operator reading a StepResult
 * or a CLI error sees which field and which limit failed.
 */
export function formatIssue(issue: z.core.$ZodIssue, root = ''): string {
  const { path, message } = describeIssue(issue);
  const where = formatPath(path, root);
  return where ? `${where}: ${message}` : message;
}

/** Every issue of an error, one formatIssue line each, joined by "; ". */
export function formatIssues(error: z.ZodError, root = ''): string {
  return error.issues.map((issue) => formatIssue(issue, root)).join('; ');
}
