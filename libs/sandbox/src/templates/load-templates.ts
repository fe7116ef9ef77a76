import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { describeIssue, formatIssue, formatPath } from '@sandstream/wire';
import { parse as parseYaml } from 'yaml';
import type { z } from 'zod';
import { type TemplatesFile, TemplatesFileSchema } from './template-schema.js';

export class TemplateFileError extends Error {
  override readonly name = 'TemplateFileError';
}

/**
 * "templates.yaml: template "node20": resources.limits.cpu: cpu must be …" — an issue under
 * `templates.<name>` is reported against that template, everything else against the file.
 */
function describeIssues(file: string, error: z.ZodError): string {
  return error.issues
    .map((issue) => {
      const { path, message } = describeIssue(issue);
      const [first, second, ...rest] = path.map(String);
      if (first === 'templates' && second !== undefined) {
        const field = formatPath(rest);
        return `${file}: template "${second}": ${field ? `${field}: ` : ''}${message}`;
      }
      return `${file}: ${formatIssue(issue)}`;
    })
    .join('\n');
}

/** Parses YAML (a superset of JSON, so .json files work too) and validates it. */
export function parseTemplates(text: string, file: string): TemplatesFile {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new TemplateFileError(`${file}: not valid YAML/JSON: ${(err as Error).message}`);
  }
  const parsed = TemplatesFileSchema.safeParse(raw ?? {});
  if (!parsed.success) throw new TemplateFileError(describeIssues(file, parsed.error));
  const data = parsed.data;
  if (data.defaultTemplate !== undefined && !(data.defaultTemplate in data.templates)) {
    throw new TemplateFileError(
      `${file}: defaultTemplate: "${data.defaultTemplate}" is not one of the templates (${Object.keys(data.templates).join(', ')})`,
    );
  }
  for (const [name, template] of Object.entries(data.templates)) {
    if (template.tenants !== undefined && template.pool === undefined) {
      throw new TemplateFileError(
        `${file}: template "${name}": tenants: reserves a warm pool for tenants, but the template declares no pool`,
      );
    }
  }
  return data;
}

export async function loadTemplatesFile(path: string): Promise<TemplatesFile> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new TemplateFileError(`${basename(path)}: cannot read ${path}: ${(err as Error).message}`);
  }
  return parseTemplates(text, basename(path));
}
