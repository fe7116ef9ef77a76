import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { type PodTemplate, parsePodTemplate } from './pod-template.js';

/** Reads an operator pod template (YAML or JSON, a Pod or a PodTemplate) at service start. */
export function loadPodTemplateFile(path: string): PodTemplate {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`pod template file ${path} cannot be read: ${(err as Error).message}`);
  }
  let value: unknown;
  try {
    value = parse(text);
  } catch (err) {
    throw new Error(`pod template file ${path} is not valid YAML: ${(err as Error).message}`);
  }
  return parsePodTemplate(value, path);
}
