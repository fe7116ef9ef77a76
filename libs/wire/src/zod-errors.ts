import type { z } from 'zod';

/**
 * Turns zod issues into one line per broken rule, each naming the field path, so that an
 * operator reading a StepResult or a CLI error sees which field and which limit failed.
 */
export function formatIssues(error: z.ZodError, root = ''): string {
  return error.issues
    .map((issue) => {
      const path = [root, ...issue.path.map(String)].filter((p) => p !== '').join('.');
      return path ? `${path}: ${issue.message}` : issue.message;
    })
    .join('; ');
}
