/** A state as a word with a colour; the word carries the meaning, the colour only helps. */
export function StateBadge({ state }: { state: string }) {
  return <span class={`state state-${state}`}>{state}</span>;
}
