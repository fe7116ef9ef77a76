import { clock, span } from '../format';
import type { Phase } from '../job-timeline';

/** The phases as rows with a bar each, scaled to the whole run, so where the time went shows. */
export function Timeline({ phases }: { phases: readonly Phase[] }) {
  if (phases.length === 0) return <p>No events yet.</p>;
  const first = phases[0]?.start ?? 0;
  const last = Math.max(Date.now(), first, ...phases.map((p) => p.end ?? 0));
  const ended = phases.every((p) => p.end !== undefined);
  const total = Math.max(1, (ended ? Math.max(...phases.map((p) => p.end ?? 0)) : last) - first);
  return (
    <table class="timeline" data-testid="timeline">
      <caption>Timeline</caption>
      <thead>
        <tr>
          <th scope="col">Phase</th>
          <th scope="col">At</th>
          <th scope="col">Took</th>
          <th scope="col">
            <span class="visually-hidden">Share of the run</span>
          </th>
        </tr>
      </thead>
      <tbody>
        {phases.map((phase, i) => {
          const end = phase.end ?? (ended ? phase.start : last);
          const left = ((phase.start - first) / total) * 100;
          const width = Math.max(0.5, ((end - phase.start) / total) * 100);
          return (
            <tr key={`${phase.label}-${i}`} class={`phase-${phase.kind}`}>
              <th scope="row">
                {phase.label}
                {phase.detail ? <span class="detail"> — {phase.detail}</span> : null}
              </th>
              <td>{clock(phase.start)}</td>
              <td>{phase.end === undefined ? 'ongoing' : span(phase.end - phase.start)}</td>
              <td class="bar-cell" aria-hidden="true">
                <span class="bar" style={{ marginLeft: `${left}%`, width: `${width}%` }} />
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
