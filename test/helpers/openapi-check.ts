import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

type Schema = Record<string, unknown>;
interface Operation {
  responses?: Record<string, { content?: Record<string, { schema?: Schema }> }>;
}

/**
 * An OpenAPI document, validated against the OpenAPI schema, that checks actual responses
 * against what it declares: the operation is found by method and path template, the status
 * must be one it lists, and a JSON body must match that status's schema.
 */
export class OpenApiDocument {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true });
  private readonly operations: { method: string; pattern: RegExp; template: string; op: Operation }[] = [];

  private constructor(readonly document: Schema) {
    (addFormats as unknown as (ajv: Ajv2020) => void)(this.ajv);
    const paths = (document.paths ?? {}) as Record<string, Record<string, Operation>>;
    for (const [template, item] of Object.entries(paths)) {
      const pattern = new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`);
      for (const [method, op] of Object.entries(item)) {
        this.operations.push({ method: method.toUpperCase(), pattern, template, op });
      }
    }
  }

  /** Validates the document; throws with the validator's errors when it is not valid OpenAPI. */
  static async load(document: Schema): Promise<OpenApiDocument> {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(document));
    if (!result.valid)
      throw new Error(`invalid OpenAPI document: ${JSON.stringify(result.errors).slice(0, 2000)}`);
    return new OpenApiDocument(validator.resolveRefs() as Schema);
  }

  get paths(): string[] {
    return [...new Set(this.operations.map((o) => `${o.method} ${o.template}`))];
  }

  /** The problems of one response, or [] when it is what the document says. */
  check(method: string, path: string, status: number, body: unknown): string[] {
    const url = path.split('?')[0] ?? path;
    const found = this.operations.find((o) => o.method === method && o.pattern.test(url));
    if (!found) return [`${method} ${url}: not in the document`];
    const response = found.op.responses?.[String(status)];
    if (!response) return [`${method} ${found.template}: status ${status} not declared`];
    const schema = response.content?.['application/json']?.schema;
    if (!schema || body === undefined) return [];
    const validate = this.ajv.compile(schema);
    if (validate(body)) return [];
    return [`${method} ${found.template} ${status}: ${this.ajv.errorsText(validate.errors)}`];
  }
}
