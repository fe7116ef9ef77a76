/** tailLines / limitBytes as the pods/log endpoint applies them. */
export function cutLog(text: string, tailLines: number | undefined, limitBytes: number | undefined): string {
  let result = text;
  if (tailLines !== undefined) {
    const lines = result.split('\n');
    const trailing = lines.at(-1) === '' ? lines.pop() : undefined;
    result =
      lines.slice(Math.max(0, lines.length - tailLines)).join('\n') + (trailing !== undefined ? '\n' : '');
  }
  if (limitBytes !== undefined) result = Buffer.from(result).subarray(0, limitBytes).toString('utf8');
  return result;
}
