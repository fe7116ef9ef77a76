import { useState } from 'preact/hooks';
import { getJson } from '../api';
import { bytes, clock } from '../format';
import type { SnapshotSummary } from '../types';
import { usePoll } from '../use-poll';
import { sandboxPath } from './sandboxes-page';

/**
 * Pick one of this sandbox's snapshots and restore it: the page owns the action (busy state,
 * notice, errors), this only lists the choices. `version` changes after a snapshot is taken, so
 * the new one shows at once rather than at the next poll.
 */
export function RestoreControl(props: {
  id: string;
  version: number;
  disabled: boolean;
  onRestore: (snapshotId: string) => void;
}) {
  const snapshots = usePoll(
    () => getJson<(SnapshotSummary & { createdAt: number })[]>(sandboxPath(props.id, '/snapshots')),
    5000,
    [props.id, props.version],
  );
  const [chosen, setChosen] = useState('');
  const list = snapshots.data ?? [];
  const selected = list.some((s) => s.snapshotId === chosen) ? chosen : (list[0]?.snapshotId ?? '');
  return (
    <span class="restore">
      <label>
        Snapshot to restore{' '}
        <select value={selected} onChange={(e) => setChosen((e.target as HTMLSelectElement).value)}>
          {list.length === 0 && <option value="">none taken</option>}
          {list.map((s) => (
            <option key={s.snapshotId} value={s.snapshotId}>
              {s.name ?? s.snapshotId} — {clock(s.createdAt)}, {bytes(s.sizeBytes)}
            </option>
          ))}
        </select>
      </label>{' '}
      <button type="button" onClick={() => props.onRestore(selected)} disabled={props.disabled || !selected}>
        Restore
      </button>
    </span>
  );
}
