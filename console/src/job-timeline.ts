import { cursorTime } from './format';
import type { Job, TimelineItem } from './types';

/** One phase of a job's life: a state it was in, or one of its steps, with when it began and ended. */
export interface Phase {
  label: string;
  kind: 'state' | 'step';
  start: number;
  end: number | undefined;
  detail?: string;
}

/**
 * The phases of a job from its timeline events: each state from the moment it was entered to
 * the next state (queued → scheduled → starting → running → done), and each step from its start
 * to its completion. Times are the stream entries' own (their ids are epoch milliseconds).
 */
export function phasesOf(job: Job | undefined, items: readonly TimelineItem[]): Phase[] {
  const phases: Phase[] = [];
  let open: Phase | undefined;
  const steps = new Map<string, Phase>();
  for (const item of items) {
    const at = cursorTime(item.cursor);
    if (item.type === 'state') {
      if (open) open.end = at;
      open = { label: item.to, kind: 'state', start: at, end: item.terminal ? at : undefined };
      if (item.to === 'running' && job?.sandbox?.start) {
        const start = job.sandbox.start;
        open.detail = `${start.kind} start${start.reason ? ` (${start.reason})` : ''}`;
      }
      if (item.reason) open.detail = [open.detail, item.reason].filter(Boolean).join('; ');
      phases.push(open);
    } else if (item.type === 'step-started') {
      const step: Phase = { label: `step ${item.stepId}`, kind: 'step', start: at, end: undefined };
      steps.set(item.stepId, step);
      phases.push(step);
    } else if (item.type === 'step-completed') {
      const step = steps.get(item.stepId);
      if (step) {
        step.end = at;
        step.detail = `exit ${item.exitCode ?? '—'}`;
      }
    }
  }
  return phases;
}
