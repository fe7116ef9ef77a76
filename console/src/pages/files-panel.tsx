import { useRef, useState } from 'preact/hooks';
import { enc, getJson, request } from '../api';
import { Problem } from '../components/problem';
import { bytes } from '../format';
import type { FileEntry } from '../types';
import { usePoll } from '../use-poll';
import { sandboxPath } from './sandboxes-page';

/** `dir` joined with a relative entry path; `..` goes up one. */
function join(dir: string, name: string): string {
  if (name === '..') {
    const parts = dir.split('/').filter(Boolean);
    parts.pop();
    return parts.length ? parts.join('/') : '.';
  }
  return dir === '.' ? name : `${dir.replace(/\/$/, '')}/${name}`;
}

/** Hands bytes to the browser as a download named `name`. */
function saveAs(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/**
 * A sandbox's files (relative paths start in its workspace): list a directory, view a text file,
 * download a file (its text) or anything as a tar, upload a file into the directory shown.
 */
export function FilesPanel({ sandboxId }: { sandboxId: string }) {
  const [dir, setDir] = useState('.');
  const [typed, setTyped] = useState('.');
  const [viewing, setViewing] = useState<{ path: string; text: string } | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const [notice, setNotice] = useState<string | undefined>(undefined);
  const fileInput = useRef<HTMLInputElement>(null);
  const listing = usePoll(
    () =>
      getJson<{ entries: FileEntry[]; truncated: boolean }>(sandboxPath(sandboxId, `/ls?path=${enc(dir)}`)),
    10_000,
    [sandboxId, dir],
  );

  const guard = (run: () => Promise<void>) => async () => {
    setError(undefined);
    setNotice(undefined);
    try {
      await run();
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  };
  const open = (entry: FileEntry) =>
    guard(async () => {
      const path = join(dir, entry.path);
      if (entry.type === 'directory') {
        setDir(path);
        setTyped(path);
        setViewing(undefined);
        return;
      }
      const text = await (await request(sandboxPath(sandboxId, `/fs?path=${enc(path)}`))).text();
      setViewing({ path, text });
    });
  const download = (entry: FileEntry) =>
    guard(async () => {
      const path = join(dir, entry.path);
      const name = path.split('/').pop() ?? 'file';
      if (entry.type === 'file') {
        const response = await request(sandboxPath(sandboxId, `/fs?path=${enc(path)}`));
        saveAs(await response.blob(), name);
      } else {
        const response = await request(sandboxPath(sandboxId, `/archive?path=${enc(path)}`));
        saveAs(await response.blob(), `${name}.tar`);
      }
    });
  const upload = guard(async () => {
    const files = fileInput.current?.files;
    if (!files || files.length === 0) throw new Error('choose a file to upload first');
    for (const file of Array.from(files)) {
      const path = join(dir, file.name);
      await request(sandboxPath(sandboxId, `/fs?path=${enc(path)}`), {
        method: 'PUT',
        body: file,
        contentType: 'application/octet-stream',
      });
      setNotice(`Uploaded ${path} (${bytes(file.size)})`);
    }
    if (fileInput.current) fileInput.current.value = '';
    listing.reload();
  });

  const entries = listing.data?.entries.filter((e) => !e.path.includes('/')) ?? [];
  return (
    <section aria-labelledby="files-title">
      <h2 id="files-title">Files</h2>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          setDir(typed.trim() || '.');
        }}
      >
        <label>
          Directory <input value={typed} onInput={(e) => setTyped((e.target as HTMLInputElement).value)} />
        </label>
        <button type="submit">List</button>
      </form>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          void upload();
        }}
      >
        <label>
          Upload into {dir} <input type="file" ref={fileInput} multiple />
        </label>
        <button type="submit">Upload</button>
      </form>
      <Problem error={listing.error ?? error} />
      {notice && (
        <p role="status" class="notice">
          {notice}
        </p>
      )}
      <table class="list" data-testid="file-list">
        <caption class="visually-hidden">Files in {dir}</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Type</th>
            <th scope="col">Size</th>
            <th scope="col">
              <span class="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {dir !== '.' && (
            <tr>
              <td>
                <button
                  type="button"
                  class="link"
                  onClick={open({ path: '..', type: 'directory', sizeBytes: 0 })}
                >
                  ..
                </button>
              </td>
              <td>directory</td>
              <td />
              <td />
            </tr>
          )}
          {entries.map((entry) => (
            <tr key={entry.path}>
              <td>
                <button type="button" class="link" onClick={open(entry)}>
                  {entry.path}
                </button>
              </td>
              <td>{entry.type}</td>
              <td>{entry.type === 'file' ? bytes(entry.sizeBytes) : ''}</td>
              <td>
                <button type="button" onClick={download(entry)} aria-label={`Download ${entry.path}`}>
                  Download
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {viewing && (
        <figure>
          <figcaption>{viewing.path}</figcaption>
          {/* biome-ignore lint/a11y/noNoninteractiveTabindex: the file scrolls, so the keyboard must reach it */}
          <pre class="file-view" tabIndex={0} data-testid="file-view">
            {viewing.text}
          </pre>
        </figure>
      )}
    </section>
  );
}
