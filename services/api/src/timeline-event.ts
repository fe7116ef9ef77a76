import type { FollowItem } from '@sandstream/client';
import { sseEvent } from './sse.js';

type OutputItem = Extract<FollowItem, { type: 'output' }>;

/**
 * One item of a job's timeline as an SSE event: its type as the event name, its cursor as the
 * id, the item as the data. Output lines (nearly every event of a log) are put together by hand,
 * byte for byte what JSON.stringify makes of the item, at under half its cost: only the line and
 * the step id can hold characters JSON escapes; the cursor (`<ms>-<n>` or `<ms>-<n>:<i>`), the stream name and the
 * seq number cannot.
 */
export function timelineEvent(item: FollowItem): string {
  if (item.type !== 'output') return sseEvent(item.type, item, item.cursor);
  const { type, cursor, stepId, stream, line, seq, ...rest } = item satisfies OutputItem;
  // An output item with more fields than these (a newer SDK) goes the general way.
  for (const _ in rest) return sseEvent(type, item, cursor);
  return `id: ${cursor}\nevent: output\ndata: {"type":"output","cursor":"${cursor}","stepId":${JSON.stringify(stepId)},"stream":"${stream}","line":${JSON.stringify(line)},"seq":${seq}}\n\n`;
}
