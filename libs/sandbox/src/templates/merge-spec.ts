/**
 * Merges spec layers, later layers winning. Map-valued fields (env, labels, resources, …) merge
 * key by key so a request can add one variable without repeating the template's; arrays and
 * scalars are replaced whole, because "append to the template's tolerations" is rarely what is
 * meant and cannot be undone by a later layer. `podTemplate` is merged deeply for the same reason.
 */
const MAP_FIELDS = new Set(['env', 'secretEnv', 'labels', 'annotations', 'nodeSelector']);

type Layer = Record<string, unknown>;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

export function deepMerge(base: unknown, over: unknown): unknown {
  if (!isPlainObject(base) || !isPlainObject(over)) return over === undefined ? base : over;
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(over)) out[key] = deepMerge(base[key], value);
  return out;
}

export function mergeSpecLayers(...layers: (Layer | undefined)[]): Layer {
  const out: Layer = {};
  for (const layer of layers) {
    if (!layer) continue;
    for (const [key, value] of Object.entries(layer)) {
      if (value === undefined) continue;
      if (MAP_FIELDS.has(key)) out[key] = { ...(out[key] as Layer | undefined), ...(value as Layer) };
      else if (key === 'resources' || key === 'podTemplate') out[key] = deepMerge(out[key], value);
      else out[key] = value;
    }
  }
  return out;
}
