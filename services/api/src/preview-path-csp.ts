import type { IncomingHttpHeaders } from 'node:http';

/**
 * The Content-Security-Policy every path-form preview answer carries (`/v1/sandboxes/{id}/proxy/…`
 * is served from the API's own origin). `sandbox` without `allow-same-origin` runs the page in an
 * opaque origin: its scripts run, but cannot read the API origin's cookies or storage, nor call
 * the API (or another sandbox's path-form preview) as that origin. What it costs the page is in
 * docs/api.md ("Origin"); the host form has an origin of its own and carries none of this.
 */
export const PATH_FORM_CSP =
  'sandbox allow-scripts allow-forms allow-popups allow-popups-to-escape-sandbox allow-modals allow-downloads';

/** The sandbox app's answer headers with our policy added; the app's own policies still apply. */
export function withPathFormCsp(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const own = headers['content-security-policy'];
  const theirs = own === undefined ? [] : Array.isArray(own) ? own : [own];
  // A comma separates policies in one header; each is enforced, so the app cannot lift ours.
  return { ...headers, 'content-security-policy': [...theirs, PATH_FORM_CSP].join(', ') };
}
