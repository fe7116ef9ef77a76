import { readFile } from 'node:fs/promises';

/** Alive means present and not a zombie waiting to be reaped (state field of /proc/<pid>/stat). */
export async function isAlive(pid: number): Promise<boolean> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // The command name may contain anything but ends at the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** Polls until the process is gone (or a zombie); false if it still runs after `withinMs`. */
export async function waitDead(pid: number, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (Date.now() < deadline) {
    if (!(await isAlive(pid))) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return !(await isAlive(pid));
}
