// The API key the console signs in with. It lives in sessionStorage: gone when the tab closes,
// never in a URL or a cookie the console sets itself.
const KEY = 'sandstream.apiKey';

export function storedKey(): string | null {
  return sessionStorage.getItem(KEY);
}

export function storeKey(key: string): void {
  sessionStorage.setItem(KEY, key);
}

export function forgetKey(): void {
  sessionStorage.removeItem(KEY);
}
