import {
  formatIssues,
  GrepStepSchema,
  JobIdSchema,
  Limits,
  ListFilesStepSchema,
  ReadFileStepSchema,
  RunStepSchema,
  SCHEMA_VERSION,
  type Step,
  StepSchema,
  TraceContextSchema,
  WriteFileStepSchema,
} from '@sandstream/wire';
import { z } from 'zod';

/**
 * The one job spec: the SDK, the CLI and every service parse submissions with this schema.
 * Steps are wire steps without `schemaVersion` / `stepId` (ids are assigned at submit, so a
 * user cannot collide them) plus per-step orchestration fields.
 */

export const TenantSchema = z
  .string()
  .min(1, 'tenant must not be empty')
  .max(63, 'tenant is at most 63 characters')
  .regex(
    /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/,
    'tenant may contain only lower-case letters, digits and "-" (it becomes a label and a key part)',
  );

const stepTimeout = z
  .number()
  .positive('timeoutSeconds must be positive')
  .max(Limits.runMaxTimeoutSeconds, `timeoutSeconds is at most ${Limits.runMaxTimeoutSeconds}`);

/** Fields every job step has on top of its wire kind. */
const orchestration = {
  /** A short human name shown in logs and the CLI. */
  name: z.string().max(256, 'name is at most 256 characters').optional(),
  /** Keep going with the next step when this one fails (non-zero exit, error, timeout). */
  continueOnError: z.boolean().default(false),
};

const withoutIds = { schemaVersion: true, stepId: true, traceContext: true } as const;

const JobRunStepSchema = RunStepSchema.omit(withoutIds).extend(orchestration);
const JobReadFileStepSchema = ReadFileStepSchema.omit(withoutIds).extend({
  ...orchestration,
  timeoutSeconds: stepTimeout.optional(),
});
const JobWriteFileStepSchema = WriteFileStepSchema.omit(withoutIds).extend({
  ...orchestration,
  timeoutSeconds: stepTimeout.optional(),
});
const JobListFilesStepSchema = ListFilesStepSchema.omit(withoutIds).extend({
  ...orchestration,
  timeoutSeconds: stepTimeout.optional(),
});
const JobGrepStepSchema = GrepStepSchema.omit(withoutIds).extend({
  ...orchestration,
  timeoutSeconds: stepTimeout.optional(),
});

/** A step of a job; like a wire Step, `kind` defaults to `run`. No `shutdown`: the services send it. */
export const JobStepSchema = z.preprocess(
  (value) =>
    value !== null && typeof value === 'object' && !Array.isArray(value) && !('kind' in value)
      ? { ...value, kind: 'run' }
      : value,
  z.discriminatedUnion('kind', [
    JobRunStepSchema,
    JobReadFileStepSchema,
    JobWriteFileStepSchema,
    JobListFilesStepSchema,
    JobGrepStepSchema,
  ]),
);
export type JobStep = z.output<typeof JobStepSchema>;
export type JobStepInput = z.input<typeof JobStepSchema>;

const envName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'environment variable names are letters, digits and _');

const quantity = (what: string, pattern: RegExp, example: string) =>
  z.string().regex(pattern, `${what} must look like ${example}`);
const cpu = quantity('cpu', /^(\d+(\.\d+)?|\d+m)$/, '"0.5", "2" or "500m"');
const memory = quantity('memory', /^\d+(\.\d+)?(Ki|Mi|Gi|Ti|K|M|G|T)?$/, '"512Mi" or "2Gi"');

/** Same shape and rules as libs/sandbox ResourcesSchema (kept here so the SDK needs no backend code). */
export const JobResourcesSchema = z.object({
  requests: z.object({ cpu: cpu.optional(), memory: memory.optional() }).optional(),
  limits: z.object({ cpu: cpu.optional(), memory: memory.optional() }).optional(),
});

const labelKey = z
  .string()
  .regex(
    /^[A-Za-z0-9]([A-Za-z0-9_./-]{0,61}[A-Za-z0-9])?$/,
    'label keys are up to 63 letters, digits, "-_./"',
  );
const labelValue = z.string().max(63, 'label values are at most 63 characters');

export const JOB_MAX_STEPS = 1000;
export const JOB_MAX_TIMEOUT_SECONDS = 7 * 24 * 3600;
export const JOB_DEFAULT_TIMEOUT_SECONDS = 3600;

export const JobSpecSchema = z
  .object({
    /** Submitting the same id twice makes one job. Generated when absent. */
    id: JobIdSchema.optional(),
    tenant: TenantSchema.default('default'),
    /** A template name (libs/sandbox TemplateRegistry) … */
    template: z.string().min(1).max(253).optional(),
    /** … or an image; with both, the image overrides the template's. */
    image: z.string().min(1).max(1024).optional(),
    /** Plain environment for the sandbox. Travels through Redis: never put secrets here. */
    env: z.record(envName, z.string().max(128 * 1024)).default({}),
    resources: JobResourcesSchema.default({}),
    steps: z
      .array(JobStepSchema)
      .min(1, 'a job needs at least one step')
      .max(JOB_MAX_STEPS, `a job has at most ${JOB_MAX_STEPS} steps`),
    /** Wall-clock limit for the whole job, queueing excluded. */
    timeoutSeconds: z
      .number()
      .positive('timeoutSeconds must be positive')
      .max(JOB_MAX_TIMEOUT_SECONDS, `timeoutSeconds is at most ${JOB_MAX_TIMEOUT_SECONDS}`)
      .default(JOB_DEFAULT_TIMEOUT_SECONDS),
    /** 1 (lowest) … 100 (most urgent); among waiting jobs the most urgent starts first. */
    priority: z
      .number()
      .int('priority must be an integer')
      .min(1, 'priority is at least 1')
      .max(100, 'priority is at most 100')
      .default(50),
    labels: z.record(labelKey, labelValue).default({}),
    traceContext: TraceContextSchema.optional(),
  })
  .refine((spec) => spec.template !== undefined || spec.image !== undefined, {
    message: 'a job needs a template or an image',
    path: ['image'],
  });

export type JobSpec = z.output<typeof JobSpecSchema>;
export type JobSpecInput = z.input<typeof JobSpecSchema>;

export class JobSpecError extends Error {
  override readonly name = 'JobSpecError';
  constructor(
    message: string,
    /** One entry per broken rule: "steps.0.command: command must not be empty". */
    readonly issues: string[],
  ) {
    super(message);
  }
}

/**
 * Parses a submission. Throws JobSpecError whose message names each field path and rule,
 * prefixed by `source` (e.g. the file the CLI read) when given.
 */
export function parseJobSpec(input: unknown, source?: string): JobSpec {
  const parsed = safeParseJobSpec(input, source);
  if (!parsed.ok) throw new JobSpecError(parsed.error, parsed.issues);
  return parsed.spec;
}

export type ParsedJobSpec = { ok: true; spec: JobSpec } | { ok: false; error: string; issues: string[] };

export function safeParseJobSpec(input: unknown, source?: string): ParsedJobSpec {
  const parsed = JobSpecSchema.safeParse(input);
  if (parsed.success) return { ok: true, spec: parsed.data };
  const issues = formatIssues(parsed.error).split('; ');
  const prefix = source ? `${source}: ` : '';
  return { ok: false, error: `${prefix}invalid job spec: ${issues.join('; ')}`, issues };
}

/** The id the i-th step (0-based) gets at submit; stable, so a resubmitted job maps the same way. */
export function stepIdFor(index: number): string {
  return `step-${index + 1}`;
}

export interface MaterializedStep {
  /** The wire Step to LPUSH on `sandbox:{jobId}:in`. */
  step: Step;
  continueOnError: boolean;
  /** The limit the dispatcher enforces for this step (run steps: the agent enforces it too). */
  timeoutSeconds: number;
  name: string | undefined;
}

/**
 * Turns a job's steps into wire Steps with ids assigned, validated by the wire's own schema,
 * so the dispatcher pushes exactly what the agent will accept.
 */
export function materializeSteps(spec: JobSpec, traceContext?: Step['traceContext']): MaterializedStep[] {
  return spec.steps.map((jobStep, index) => {
    const { continueOnError, name, ...rest } = jobStep;
    const timeoutSeconds = rest.timeoutSeconds ?? Limits.runDefaultTimeoutSeconds;
    const wire = StepSchema.parse({
      ...rest,
      schemaVersion: SCHEMA_VERSION,
      stepId: stepIdFor(index),
      ...(traceContext ? { traceContext } : {}),
    });
    return { step: wire, continueOnError, timeoutSeconds, name };
  });
}
