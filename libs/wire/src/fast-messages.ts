import type { ControlMessage } from './control.js';
import {
  attempt,
  checkStringRecord,
  checkStrings,
  isObject,
  type Json,
  notSure,
  num,
  oneOf,
  optBool,
  optNum,
  optObject,
  optStr,
  put,
  str,
} from './fast-read.js';
import { JOB_ID_MAX_LENGTH, JOB_ID_PATTERN } from './key-names.js';
import { Limits } from './limits.js';
import type { PoolClaim } from './pool-claim.js';
import { SUPPORTED_SCHEMA_MAJORS } from './schema-major.js';

/**
 * ControlMessageSchema (control.ts) and PoolClaimSchema (pool-claim.ts) without zod, as
 * fast-step.ts is StepSchema: the schema's output for a message these are sure of, undefined for
 * anything else (the caller then asks the schema). fast-step.test.ts holds them to their schemas.
 */

const SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGKILL', 'SIGUSR1', 'SIGUSR2'] as const;

function parse(raw: string): Json {
  if (raw.length * 3 > Limits.messageMaxBytes) notSure();
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    return notSure();
  }
  return isObject(json) ? json : notSure();
}

/** decodeControlMessage's value for `raw` when sure it is valid; undefined: ask decodeControlMessage. */
export function fastDecodeControlMessage(raw: string): ControlMessage | undefined {
  return attempt(() => {
    const o = parse(raw);
    const version = num(o, 'schemaVersion', { int: true });
    if (!SUPPORTED_SCHEMA_MAJORS.includes(version)) notSure();
    if (o.kind !== 'cancel') notSure();
    const out: Json = {
      schemaVersion: version,
      kind: 'cancel',
      stepId: str(o, 'stepId', { min: 1, max: 256 }),
    };
    put(out, 'reason', optStr(o, 'reason', { max: 1024 }));
    put(out, 'signal', oneOf(o, 'signal', SIGNALS));
    return out as ControlMessage;
  });
}

const POOL_CLAIM_KEYS = [
  'jobId',
  'username',
  'notifyStream',
  'live',
  'env',
  'unsetEnv',
  'traceContext',
  'claimedAt',
];
const envName = { max: 256, pattern: /^[A-Za-z_][A-Za-z0-9_.-]*$/ };

/** PoolClaimSchema's output for `json` when sure of it (a strict object: no unknown key); undefined: ask it. */
export function fastPoolClaim(json: unknown): PoolClaim | undefined {
  return attempt(() => {
    if (!isObject(json)) return notSure();
    for (const key of Object.keys(json)) if (!POOL_CLAIM_KEYS.includes(key)) notSure();
    const out: Json = {
      jobId: str(json, 'jobId', { min: 1, max: JOB_ID_MAX_LENGTH, pattern: JOB_ID_PATTERN }),
    };
    put(out, 'username', optStr(json, 'username', { min: 1, max: 256 }));
    put(out, 'notifyStream', optStr(json, 'notifyStream', { min: 1, max: 1024 }));
    out.live = optBool(json, 'live', false);
    out.env = json.env === undefined ? {} : checkStringRecord(json.env, envName, { max: 128 * 1024 });
    out.unsetEnv = json.unsetEnv === undefined ? [] : checkStrings(json.unsetEnv, envName, 0, 1000);
    const trace = optObject(json, 'traceContext');
    if (trace) {
      const traceContext: Json = { traceparent: str(trace, 'traceparent', { max: 512 }) };
      put(traceContext, 'tracestate', optStr(trace, 'tracestate', { max: 1024 }));
      out.traceContext = traceContext;
    }
    put(out, 'claimedAt', optNum(json, 'claimedAt'));
    return out as PoolClaim;
  });
}
