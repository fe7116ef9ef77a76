/**
 * Errors in the API server's own shape (a `Status` object), so the real client library parses
 * them exactly as it would a cluster's.
 */
export class ApiStatusError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }

  toStatus() {
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: this.message,
      reason: this.reason,
      code: this.code,
    };
  }
}

export const notFound = (kind: string, name: string) =>
  new ApiStatusError(404, 'NotFound', `${kind} "${name}" not found`);
export const alreadyExists = (kind: string, name: string) =>
  new ApiStatusError(409, 'AlreadyExists', `${kind} "${name}" already exists`);
export const invalid = (kind: string, name: string, detail: string) =>
  new ApiStatusError(422, 'Invalid', `${kind} "${name}" is invalid: ${detail}`);
export const badRequest = (detail: string) => new ApiStatusError(400, 'BadRequest', detail);
export const gone = (detail: string) => new ApiStatusError(410, 'Expired', detail);
