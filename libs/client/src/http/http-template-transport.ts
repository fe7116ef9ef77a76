import { type TemplateInfo, TemplateInfoSchema } from '@sandstream/bus';
import { z } from 'zod';
import type { TemplateTransport } from '../templates.js';
import type { HttpApi } from './http-api.js';

/** `GET /v1/templates` as far as the SDK reads it: the list (the default beside it is the API's). */
const ListAnswerSchema = z.object({ templates: z.array(TemplateInfoSchema) });

/** Templates over the HTTP API (`/v1/templates…`): the file's and the built ones. */
export class HttpTemplateTransport implements TemplateTransport {
  constructor(private readonly api: HttpApi) {}

  async list(): Promise<TemplateInfo[]> {
    return ListAnswerSchema.parse(await this.api.json('/v1/templates')).templates;
  }

  async delete(name: string): Promise<void> {
    const response = await this.api.request(`/v1/templates/${encodeURIComponent(name)}`, {
      method: 'DELETE',
    });
    await response.body?.cancel();
  }
}
