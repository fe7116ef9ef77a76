/** A job file that cannot be read or parsed; its own module so main.ts loads the YAML parser only for `submit`. */
export class SpecFileError extends Error {
  override readonly name = 'SpecFileError';
}
