import path from 'node:path';

/**
 * Where a step's relative paths start: its workingDirectory (itself relative to the agent's
 * base directory) or the base directory. Absolute paths are taken as they are: the sandbox
 * boundary is the container, not the agent, so the agent does not try to confine paths.
 */
export function stepDirectory(baseDirectory: string, workingDirectory: string | null | undefined): string {
  return workingDirectory ? path.resolve(baseDirectory, workingDirectory) : path.resolve(baseDirectory);
}

export function resolveStepPath(
  baseDirectory: string,
  workingDirectory: string | null | undefined,
  target: string,
): string {
  return path.resolve(stepDirectory(baseDirectory, workingDirectory), target);
}
