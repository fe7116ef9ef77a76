import { PassThrough } from 'node:stream';
import { JobSpecSchema } from '@sandstream/bus';
import { describe, expect, it } from 'vitest';
import { describeGap, describeOutput, plural, TimelineRenderer } from './render.js';

function target(tty: boolean) {
  const out = Object.assign(new PassThrough(), { isTTY: tty });
  const err = Object.assign(new PassThrough(), { isTTY: tty });
  const text = (s: PassThrough) => () => (s.read() as Buffer | null)?.toString() ?? '';
  return { out, err, readOut: text(out), readErr: text(err) };
}

describe('TimelineRenderer', () => {
  it('prints an image pull as lines when piped, and in the spinner on a TTY until it is done', async () => {
    const progress = (done: boolean) => ({
      type: 'progress' as const,
      cursor: '3-0',
      message: done ? 'pulled image r:5000/x:1 (2 layers, 3.0 MB)' : 'pulling image r:5000/x:1: 1/2 layers',
      progress: {
        phase: 'image-pull' as const,
        image: 'r:5000/x:1',
        layers: 2,
        layersDone: done ? 2 : 1,
        downloadedBytes: 1,
        totalBytes: 3_000_000,
        done,
      },
    });
    const piped = target(false);
    const plain = new TimelineRenderer(piped, null);
    plain.render(progress(false));
    plain.render(progress(true));
    expect(piped.readErr()).toBe(
      '● pulling image r:5000/x:1: 1/2 layers\n● pulled image r:5000/x:1 (2 layers, 3.0 MB)\n',
    );
    const tty = target(true);
    const live = new TimelineRenderer(tty, null);
    live.render(progress(false));
    let err = '';
    await expect
      .poll(() => {
        err += tty.readErr();
        return err;
      })
      .toMatch(/\r[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] pulling image r:5000\/x:1: 1\/2 layers/);
    live.render(progress(true));
    err += tty.readErr();
    expect(err).toMatch(/● pulled image r:5000\/x:1 \(2 layers, 3.0 MB\)\n$/);
  });

  it('shows a spinner while the sandbox starts on a TTY, and erases it', async () => {
    const t = target(true);
    const renderer = new TimelineRenderer(t, null);
    renderer.render({ type: 'state', cursor: '1-0', from: 'scheduled', to: 'starting', terminal: false });
    // Wait for the spinner's first frame itself rather than a guess at its timer.
    let err = '';
    await expect
      .poll(() => {
        err += t.readErr();
        return err;
      })
      .toMatch(/\r[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] waiting/);
    renderer.render({ type: 'step-started', cursor: '2-0', stepId: 'step-1' });
    err += t.readErr();
    expect(err).toMatch(/● starting\n/);
    expect(err).toMatch(/\r[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] waiting for the sandbox \(starting\)/);
    expect(err.endsWith('\r\u001b[2K')).toBe(true);
    expect(t.readOut()).toBe('▶ step-1  step-1\n');
  });

  it('prints plain lines only when not on a TTY', async () => {
    const t = target(false);
    const renderer = new TimelineRenderer(t, null);
    // A TTY renderer given the same event is the witness: once it has drawn two spinner frames,
    // this one would have drawn some too had it a spinner.
    const witness = target(true);
    const witnessRenderer = new TimelineRenderer(witness, null);
    renderer.render({ type: 'state', cursor: '1-0', from: 'queued', to: 'scheduled', terminal: false });
    witnessRenderer.render({
      type: 'state',
      cursor: '1-0',
      from: 'queued',
      to: 'scheduled',
      terminal: false,
    });
    let drawn = '';
    await expect
      .poll(() => {
        drawn += witness.readErr();
        return drawn.match(/\r[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] /g)?.length ?? 0;
      })
      .toBeGreaterThanOrEqual(2);
    witnessRenderer.stopSpinner();
    renderer.render({
      type: 'output',
      cursor: '2-0',
      stepId: 'step-1',
      stream: 'stderr',
      line: 'warn',
      seq: 1,
    });
    expect(t.readErr()).toBe('● scheduled\nwarn\n');
  });

  it('summarises structured results', () => {
    expect(
      describeOutput({
        schemaVersion: 1,
        stepId: 'step-1',
        exitCode: 0,
        timedOut: false,
        durationSeconds: 0,
        errorMessage: null,
        output: {
          kind: 'grep',
          engine: 'builtin',
          truncated: false,
          matches: [{ path: 'a.txt', line: 2, column: 3, text: 'xx hit' }],
        },
      }),
    ).toEqual(['  a.txt:2:3: xx hit']);
  });

  it('counts in the singular for one ("1 line", never "1 lines")', () => {
    expect(plural(1, 'step')).toBe('1 step');
    expect(plural(0, 'step')).toBe('0 steps');
    const t = target(false);
    const renderer = new TimelineRenderer(t, null);
    renderer.render({
      type: 'step-completed',
      cursor: '1-0',
      stepId: 'step-1',
      exitCode: 0,
      droppedLines: 1,
      seq: 3,
    });
    renderer.render({
      type: 'step-completed',
      cursor: '2-0',
      stepId: 'step-2',
      exitCode: 0,
      droppedLines: 2,
      seq: 4,
    });
    expect(t.readOut()).toBe('◀ step-1  exit 0, 1 line dropped\n◀ step-2  exit 0, 2 lines dropped\n');
    const result = {
      schemaVersion: 1,
      stepId: 'step-1',
      exitCode: 0,
      timedOut: false,
      durationSeconds: 0,
      errorMessage: null,
    } as const;
    expect(describeOutput({ ...result, output: { kind: 'writeFile', path: 'a', bytesWritten: 1 } })).toEqual([
      '  wrote 1 byte to a',
    ]);
    const entries = Array.from({ length: 3 }, (_, i) => ({
      path: `f${i}`,
      type: 'file' as const,
      sizeBytes: 1,
    }));
    expect(
      describeOutput({ ...result, output: { kind: 'listFiles', path: '.', truncated: false, entries } }, 2),
    ).toEqual(['  - f0 (1 B)', '  - f1 (1 B)', '  … 1 more line']);
  });

  it('marks gaps in place with thousands separators, and a step whose start was trimmed', () => {
    const t = target(false);
    const spec = JobSpecSchema.parse({ image: 'none', steps: [{ command: 'seq', args: ['5000'] }] });
    const renderer = new TimelineRenderer(t, spec);
    renderer.render({ type: 'gap', cursor: '1-0', stepId: 'step-1', from: 1, to: 2774, startTrimmed: true });
    renderer.render({
      type: 'output',
      cursor: '2-0',
      stepId: 'step-1',
      stream: 'stdout',
      line: '2775',
      seq: 2775,
    });
    renderer.render({ type: 'gap', cursor: '2-0', stepId: 'step-1', from: 2776, to: 2776 });
    renderer.render({
      type: 'output',
      cursor: '3-0',
      stepId: 'step-1',
      stream: 'stdout',
      line: '2777',
      seq: 2777,
    });
    renderer.render({ type: 'gap', cursor: '3-0', stepId: 'step-1', from: 2778, to: 1_002_777 });
    renderer.render({
      type: 'step-completed',
      cursor: '4-0',
      stepId: 'step-1',
      exitCode: 0,
      droppedLines: 0,
      seq: 1_002_778,
    });
    expect(t.readOut()).toBe(
      [
        '▶ step-1  run: seq 5000  (its start was trimmed from the log)',
        '… 2,774 lines not shown …',
        '2775',
        '… 1 line not shown …',
        '2777',
        '… 1,000,000 lines not shown …',
        '◀ step-1  exit 0',
        '',
      ].join('\n'),
    );
    // Only the started event trimmed: the header, and no empty marker.
    renderer.render({ type: 'gap', cursor: '5-0', stepId: 'step-2', from: 1, to: 0, startTrimmed: true });
    expect(t.readOut()).toBe('▶ step-2  step-2  (its start was trimmed from the log)\n');
    // exec prints the same marker for a live sandbox's command.
    expect(describeGap({ from: 10, to: 12_009 })).toBe('… 12,000 lines not shown …');
  });
});
