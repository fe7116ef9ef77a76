/** A claim message is at most this long; a longer one is refused before parsing. */
export const POOL_CLAIM_MAX_BYTES = 1024 * 1024;
