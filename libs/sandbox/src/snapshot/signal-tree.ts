import type { SandboxExec } from './work-tar.js';

/**
 * Sends a signal to every process below the agent (PID 1 of the toolchain container): its
 * commands and whatever they started, orphans reparented to it included. Used where the sandbox
 * cannot be paused from outside while a command is also run in it (Kubernetes has no pause of a
 * pod; a `docker pause`d gVisor container takes no `docker exec`), so the freeze is SIGSTOP run in
 * the sandbox, as in-process. Passes repeat until no new process turns up (one being stopped may
 * have just forked); exec sessions (PPid 0, under runc and gVisor alike), among them this script,
 * are not the sandbox's and are left alone. Only shell builtins: any image's `sh` does.
 */
const SIGNAL_TREE_SCRIPT = `sig=$1
done_=" 1 "
while :; do
  new=""
  for d in /proc/[0-9]*; do
    p=\${d#/proc/}
    case "$done_" in *" $p "*) continue ;; esac
    pp=""
    while read -r k v; do
      if [ "$k" = "PPid:" ]; then pp=$v; break; fi
    done 2>/dev/null < "$d/status"
    case "$done_" in *" $pp "*) kill -"$sig" "$p" 2>/dev/null && new="$new$p " ;; esac
  done
  [ -z "$new" ] && break
  done_="$done_$new"
done`;

async function signalTree(exec: SandboxExec, signal: 'STOP' | 'CONT'): Promise<void> {
  const run = await exec(['sh', '-c', SIGNAL_TREE_SCRIPT, 'sandstream-freeze', signal]);
  run.stdout.resume();
  await run.done;
}

/** Stops the sandbox's processes; the returned function lets them run again. */
export async function freezeByExec(exec: SandboxExec): Promise<() => Promise<void>> {
  await signalTree(exec, 'STOP');
  return () => thawByExec(exec);
}

/** SIGCONT to every process below the agent: idempotent, and harmless to a sandbox not frozen. */
export function thawByExec(exec: SandboxExec): Promise<void> {
  return signalTree(exec, 'CONT');
}
