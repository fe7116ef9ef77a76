import { useState } from 'preact/hooks';
import { getJson } from '../api';
import { Problem } from '../components/problem';
import { clock } from '../format';
import { sandboxPath } from './sandboxes-page';

interface PreviewUrl {
  url: string;
  expiresAt?: number;
}

/**
 * A preview URL of a port the sandbox serves on (GET …/ports/{port}/url): private, with its own
 * token, unless asked public. It opens in a new tab; the API proxies it to the sandbox.
 */
export function PreviewPanel({ sandboxId }: { sandboxId: string }) {
  const [port, setPort] = useState('8080');
  const [made, setMade] = useState<PreviewUrl | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const make = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    setMade(undefined);
    try {
      setMade(
        await getJson<PreviewUrl>(sandboxPath(sandboxId, `/ports/${encodeURIComponent(port.trim())}/url`)),
      );
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  };
  return (
    <section aria-labelledby="preview-title">
      <h2 id="preview-title">Preview URL</h2>
      <form class="filters" onSubmit={make}>
        <label>
          Port{' '}
          <input
            inputMode="numeric"
            value={port}
            size={6}
            onInput={(e) => setPort((e.target as HTMLInputElement).value)}
          />
        </label>
        <button type="submit">Get preview URL</button>
      </form>
      <Problem error={error} />
      {made && (
        <p>
          <a href={made.url} target="_blank" rel="noopener noreferrer" data-testid="preview-url">
            {made.url}
          </a>
          {made.expiresAt ? ` (valid until ${clock(made.expiresAt)})` : ''}
        </p>
      )}
    </section>
  );
}
