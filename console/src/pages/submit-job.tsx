import { useState } from 'preact/hooks';
import { request } from '../api';
import { Problem } from '../components/problem';
import { href } from '../router';

// No image: the API's default one (API_DEFAULT_IMAGE) or template.
const EXAMPLE = `timeoutSeconds: 120
steps:
  - name: count
    command: sh
    args: ["-c", "for i in 1 2 3 4 5; do echo line $i; sleep 1; done"]
`;

/** Submit a job file (YAML, as `sandstream submit` takes it); opens the new job's page. */
export function SubmitJob({ onSubmitted }: { onSubmitted: () => void }) {
  const [yaml, setYaml] = useState(EXAMPLE);
  const [error, setError] = useState<string | undefined>(undefined);
  const submit = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    try {
      const response = await request('/v1/jobs', {
        method: 'POST',
        body: yaml,
        contentType: 'application/yaml',
      });
      const { jobId } = (await response.json()) as { jobId: string };
      onSubmitted();
      location.hash = href('jobs', jobId);
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  };
  return (
    <details class="submit">
      <summary>Submit a job</summary>
      <form onSubmit={submit}>
        <label for="job-yaml">Job file (YAML)</label>
        <textarea
          id="job-yaml"
          rows={8}
          value={yaml}
          onInput={(e) => setYaml((e.target as HTMLTextAreaElement).value)}
        />
        <button type="submit">Submit</button>
        <Problem error={error} />
      </form>
    </details>
  );
}
