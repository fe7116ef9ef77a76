/** The code interpreter's languages and default contexts (code.ts), without zod. */
export const CODE_LANGUAGES = ['python', 'javascript', 'bash'] as const;
export type CodeLanguage = (typeof CODE_LANGUAGES)[number];

/** The context a language's cells go to when the call names none (one per language). */
export function defaultCodeContext(language: CodeLanguage): string {
  return `default-${language}`;
}
