/** An error answer shown where it happened, announced to screen readers. */
export function Problem({ error }: { error: string | undefined }) {
  if (!error) return null;
  return (
    <p role="alert" class="error">
      {error}
    </p>
  );
}
