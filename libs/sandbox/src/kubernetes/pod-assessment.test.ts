import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { assessPod } from './pod-assessment.js';

const spec = {
  initContainers: [{ name: 'inject-agent', image: 'carrier:1' }],
  containers: [{ name: 'toolchain', image: 'node:20' }],
};
const pod = (status: V1Pod['status']): V1Pod => ({ metadata: { name: 'sbx' }, spec, status });

describe('assessPod', () => {
  it('is running only when the pod runs and the toolchain container runs', () => {
    expect(assessPod(pod({ phase: 'Pending' }))).toMatchObject({ state: 'pending' });
    expect(
      assessPod(
        pod({
          phase: 'Running',
          containerStatuses: [
            {
              name: 'toolchain',
              image: '',
              imageID: '',
              ready: true,
              restartCount: 0,
              state: { running: {} },
            },
          ],
        }),
      ),
    ).toEqual({ state: 'running' });
  });

  it.each([
    [
      'ErrImageNeverPull',
      'Container image "node:20" is not present with pull policy of Never',
      'image_not_found',
    ],
    [
      'ErrImagePull',
      'rpc error: code = NotFound desc = failed to pull and unpack image "node:20": not found',
      'image_not_found',
    ],
    ['ImagePullBackOff', 'Back-off pulling image "node:20": 401 Unauthorized', 'image_pull'],
    ['CreateContainerConfigError', 'secret "git" not found', 'backend_error'],
    ['CrashLoopBackOff', 'back-off 10s restarting failed container', 'agent_crashed'],
  ])('waiting %s -> %s', (reason, message, expected) => {
    const result = assessPod(
      pod({
        phase: 'Pending',
        containerStatuses: [
          {
            name: 'toolchain',
            image: '',
            imageID: '',
            ready: false,
            restartCount: 0,
            state: { waiting: { reason, message } },
          },
        ],
      }),
    );
    expect(result).toMatchObject({ state: 'failed', reason: expected });
    if (result.state === 'failed') expect(result.message).toContain(message);
  });

  it('a failed init container or an exited toolchain is agent_crashed with the exit code', () => {
    const init = assessPod(
      pod({
        phase: 'Failed',
        initContainerStatuses: [
          {
            name: 'inject-agent',
            image: '',
            imageID: '',
            ready: false,
            restartCount: 0,
            state: { terminated: { exitCode: 1, reason: 'Error' } },
          },
        ],
      }),
    );
    expect(init).toMatchObject({ state: 'failed', reason: 'agent_crashed', logContainer: 'inject-agent' });
    const main = assessPod(
      pod({
        phase: 'Running',
        containerStatuses: [
          {
            name: 'toolchain',
            image: '',
            imageID: '',
            ready: false,
            restartCount: 0,
            state: { terminated: { exitCode: 3, reason: 'Error' } },
          },
        ],
      }),
    );
    expect(main).toMatchObject({ state: 'failed', reason: 'agent_crashed', logContainer: 'toolchain' });
    if (main.state === 'failed') expect(main.message).toContain('exit code 3');
  });

  it('PodScheduled=False Unschedulable is unschedulable; a running sidecar is not a failure', () => {
    expect(
      assessPod(
        pod({
          phase: 'Pending',
          conditions: [
            {
              type: 'PodScheduled',
              status: 'False',
              reason: 'Unschedulable',
              message: '0/3 nodes are available',
            },
          ],
        }),
      ),
    ).toMatchObject({ state: 'failed', reason: 'unschedulable' });
    const withSidecar: V1Pod = {
      spec: {
        ...spec,
        initContainers: [...spec.initContainers, { name: 'sidecar', image: 'x', restartPolicy: 'Always' }],
      },
      status: {
        phase: 'Pending',
        initContainerStatuses: [
          {
            name: 'inject-agent',
            image: '',
            imageID: '',
            ready: false,
            restartCount: 0,
            state: { terminated: { exitCode: 0 } },
          },
          { name: 'sidecar', image: '', imageID: '', ready: true, restartCount: 0, state: { running: {} } },
        ],
      },
    };
    expect(assessPod(withSidecar)).toMatchObject({ state: 'pending' });
  });

  it('a pod being deleted is a failure, not a start in progress', () => {
    expect(
      assessPod({ ...pod({ phase: 'Running' }), metadata: { deletionTimestamp: new Date() } }),
    ).toMatchObject({
      state: 'failed',
      reason: 'backend_error',
    });
  });
});
