import { useState } from 'preact/hooks';
import { fetchMe, type Me } from '../me';
import { storeKey } from '../session';

/** Sign in with an API key (`sandstream apikey create --tenant <t>`): checked, then kept for this tab. */
export function SignIn({ onSignedIn }: { onSignedIn: (me: Me) => void }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<string | undefined>(undefined);
  const [busy, setBusy] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const me = await fetchMe(key.trim());
      storeKey(key.trim());
      onSignedIn(me);
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <main class="sign-in">
      <h1>Sandstream console</h1>
      <form onSubmit={submit}>
        <label for="api-key">API key</label>
        <input
          id="api-key"
          name="api-key"
          type="password"
          autocomplete="off"
          required
          value={key}
          onInput={(e) => setKey((e.target as HTMLInputElement).value)}
          aria-describedby="api-key-help"
        />
        <p id="api-key-help" class="help">
          A key from <code>sandstream apikey create --tenant &lt;tenant&gt;</code>. It stays in this tab only
          (session storage) and is sent to this API only.
        </p>
        <button type="submit" disabled={busy}>
          Sign in
        </button>
        {error && (
          <p role="alert" class="error">
            Sign-in failed: {error}
          </p>
        )}
      </form>
    </main>
  );
}
