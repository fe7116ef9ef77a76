/** How the API makes and serves preview URLs (sandbox.ports.url). */
export interface PreviewConfig {
  /** Host-form previews live under `{port}-{label}.{domain}` (SANDSTREAM_PREVIEW_DOMAIN, default localhost). */
  domain: string;
  /**
   * The API as a URL's user reaches it (API_PUBLIC_URL); unset, the URL is made from the
   * request's own Host and scheme, which is right whenever the caller and the browser reach the
   * API at the same address.
   */
  publicUrl: string | undefined;
  /**
   * How body-less GETs are proxied (API_PREVIEW_FORWARD): `passthrough` (default) relays the
   * answer's body socket to socket (preview-passthrough.ts); `reply-from` sends every request
   * through @fastify/reply-from, as all other methods and upgrades are (the comparison baseline).
   */
  forward?: 'passthrough' | 'reply-from';
}
