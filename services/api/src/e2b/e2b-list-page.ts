import { z } from 'zod';
import { HttpProblem } from '../problem.js';

/** What a page is made of: sandboxes, snapshots (by their snapshot id). */
interface Listed {
  createdAt: number;
  id: string;
}

/**
 * Paging of E2B's `GET /v2/sandboxes` and `GET /snapshots`: newest first (created, then id), a page of `limit`, and
 * when more follow an opaque `x-next-token` naming the last one given: the next page starts
 * after it, so sandboxes created meanwhile (newer) never shift a page already read.
 */
const CursorSchema = z.object({ c: z.number().int(), i: z.string().min(1) });
type Cursor = z.infer<typeof CursorSchema>;

function newestFirst(a: Listed, b: Listed): number {
  return b.createdAt - a.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

function after(record: Listed, cursor: Cursor): boolean {
  return record.createdAt < cursor.c || (record.createdAt === cursor.c && record.id > cursor.i);
}

function readCursor(token: string): Cursor {
  try {
    return CursorSchema.parse(JSON.parse(Buffer.from(token, 'base64url').toString('utf8')));
  } catch {
    throw new HttpProblem(400, 'invalid-request', 'querystring.nextToken: not a token this server gave', [
      { field: 'querystring.nextToken', rule: 'the x-next-token of the previous page' },
    ]);
  }
}

export function listPage<T extends Listed>(
  records: T[],
  limit: number,
  nextToken: string | undefined,
): { page: T[]; nextToken: string | undefined } {
  const cursor = nextToken === undefined ? undefined : readCursor(nextToken);
  const rest = records.sort(newestFirst).filter((r) => cursor === undefined || after(r, cursor));
  const page = rest.slice(0, limit);
  const last = page.at(-1);
  if (rest.length <= limit || last === undefined) return { page, nextToken: undefined };
  const token = Buffer.from(JSON.stringify({ c: last.createdAt, i: last.id })).toString('base64url');
  return { page, nextToken: token };
}
