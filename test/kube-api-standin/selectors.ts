import { badRequest } from './api-status.js';
import type { KubeObject } from './kube-object.js';

type Requirement =
  | { op: 'eq' | 'neq'; key: string; value: string }
  | { op: 'exists' | 'notExists'; key: string }
  | { op: 'in' | 'notIn'; key: string; values: string[] };

/** Splits on commas that are not inside `in (a,b)` parentheses. */
function splitTerms(selector: string): string[] {
  const terms: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of selector) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      terms.push(current);
      current = '';
    } else current += ch;
  }
  terms.push(current);
  return terms.map((t) => t.trim()).filter(Boolean);
}

/** Label selector syntax as kubectl and the API accept it: =, ==, !=, in, notin, key, !key. */
export function parseLabelSelector(selector: string | null): Requirement[] {
  if (!selector) return [];
  return splitTerms(selector).map((term) => {
    let m = /^([^\s!=]+)\s*(==|=|!=)\s*(\S*)$/.exec(term);
    if (m) return { op: m[2] === '!=' ? 'neq' : 'eq', key: m[1]!, value: m[3]! };
    m = /^(\S+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(term);
    if (m)
      return {
        op: m[2] === 'in' ? 'in' : 'notIn',
        key: m[1]!,
        values: m[3]!.split(',').map((v) => v.trim()),
      };
    m = /^!(\S+)$/.exec(term);
    if (m) return { op: 'notExists', key: m[1]! };
    if (/^[^\s!=(),]+$/.test(term)) return { op: 'exists', key: term };
    throw badRequest(`unable to parse requirement: ${JSON.stringify(term)}`);
  });
}

export function matchesLabels(object: KubeObject, requirements: Requirement[]): boolean {
  const labels = object.metadata.labels ?? {};
  return requirements.every((r) => {
    const value = labels[r.key];
    switch (r.op) {
      case 'eq':
        return value === r.value;
      case 'neq':
        return value !== r.value;
      case 'exists':
        return value !== undefined;
      case 'notExists':
        return value === undefined;
      case 'in':
        return value !== undefined && r.values.includes(value);
      case 'notIn':
        return value === undefined || !r.values.includes(value);
      default:
        return false;
    }
  });
}

/** Field selectors: only metadata.name and metadata.namespace, which is what watchers of one object use. */
export function parseFieldSelector(selector: string | null): (object: KubeObject) => boolean {
  if (!selector) return () => true;
  const checks = splitTerms(selector).map((term) => {
    const m = /^(metadata\.name|metadata\.namespace)\s*(==|=|!=)\s*(\S*)$/.exec(term);
    if (!m)
      throw badRequest(
        `field selector ${JSON.stringify(term)}: the stand-in supports metadata.name and metadata.namespace`,
      );
    const field = m[1] === 'metadata.name' ? 'name' : 'namespace';
    const negate = m[2] === '!=';
    const expected = m[3];
    return (object: KubeObject) => (object.metadata[field] === expected) !== negate;
  });
  return (object) => checks.every((check) => check(object));
}
