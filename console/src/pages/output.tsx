import type { TimelineItem } from '../types';

/** Lines in a gap: `from`..`to` both missing (0 when only a step's started event went). */
const gapLines = (gap: { from: number; to: number }) => Math.max(0, gap.to - gap.from + 1);

/** Lines shown at most; older ones are summarised (the full log stays in the API). */
const MAX_LINES = 5000;

/**
 * A job's output as it arrives: a header per step, stderr marked, and a marker wherever the
 * capped stream no longer held lines (`… 2,774 lines not shown …`), as the CLI prints it.
 */
export function Output({ items }: { items: readonly TimelineItem[] }) {
  // The newest MAX_LINES lines; step headers and gap markers are always kept, wherever they are.
  let outputs = 0;
  for (const i of items) if (i.type === 'output') outputs++;
  let hidden = Math.max(0, outputs - MAX_LINES);
  const skipped = hidden;
  // An image pull reports progress many times; only the newest says where it stands.
  let lastProgress: TimelineItem | undefined;
  for (const i of items) if (i.type === 'progress') lastProgress = i;
  const shown = items.filter((i) => {
    if (i.type === 'output') return hidden-- <= 0;
    if (i.type === 'progress') return i === lastProgress;
    return i.type === 'gap' || i.type === 'step-started';
  });
  return (
    <section aria-label="Output">
      {/* biome-ignore lint/a11y/noNoninteractiveTabindex: the log scrolls, so the keyboard must reach it */}
      <pre class="output" role="log" tabIndex={0} aria-label="Job output" data-testid="job-output">
        {skipped > 0 && (
          <span class="gap">
            … {skipped.toLocaleString()} earlier lines not shown here …{'\n'}
          </span>
        )}
        {shown.map((item) => {
          if (item.type === 'step-started')
            return (
              <span class="step-header" key={item.cursor}>
                ▶ step {item.stepId}
                {'\n'}
              </span>
            );
          if (item.type === 'gap')
            return (
              <span class="gap" key={item.cursor}>
                … {gapLines(item).toLocaleString()} lines not shown …{'\n'}
              </span>
            );
          if (item.type === 'progress')
            return (
              <span class="gap" key={item.cursor}>
                … {item.message || `pulling ${item.progress.image}`} ({item.progress.layersDone}/
                {item.progress.layers} layers{item.progress.done ? ', done' : ''}) …{'\n'}
              </span>
            );
          if (item.type === 'output')
            return (
              <span class={item.stream === 'stderr' ? 'stderr' : undefined} key={item.cursor}>
                {item.line}
                {'\n'}
              </span>
            );
          return null;
        })}
      </pre>
    </section>
  );
}
