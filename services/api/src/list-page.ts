/**
 * One page of a newest-first list: the SDK lists at most 1,000, so a page is cut from the first
 * `offset + limit`; `next` is the offset of the page after it, when there may be one.
 */
export function page<T>(all: T[], offset: number, limit: number): { items: T[]; next: number | undefined } {
  const items = all.slice(offset, offset + limit);
  const next = offset + limit;
  return { items, next: items.length === limit && next < 1000 ? next : undefined };
}
