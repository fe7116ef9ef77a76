import { z } from 'zod';

/**
 * What the generated messages of E2B's `filesystem.Filesystem` (src/gen/filesystem/, from
 * proto/filesystem/filesystem.proto) cannot say themselves: proto3 has no required fields.
 * Checked on the decoded message by parseMessage, which names the call and the field.
 */
export const PathRequestSchema = z.object({ path: z.string().min(1, 'path is required') });
export const MoveRequestSchema = z.object({
  source: z.string().min(1, 'source is required'),
  destination: z.string().min(1, 'destination is required'),
});
