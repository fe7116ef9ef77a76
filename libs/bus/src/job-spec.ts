import {
  byteBoundedString,
  formatIssue,
  GrepStepSchema,
  JobIdSchema,
  Limits,
  ListFilesStepSchema,
  overLimit,
  ReadFileStepSchema,
  RunStepSchema,
  SCHEMA_VERSION,
  type Step,
  StepSchema,
  stdinBytes,
  strictObject,
  TraceContextSchema,
  WriteFileStepSchema,
  withoutNul,
} from '@sandstream/wire';
import { z } from 'zod';
import { VolumeMountsSchema } from './volume-spec.js';

/**
 * The one job spec: the SDK, the CLI and every service parse submissions with this schema.
 * Steps are wire steps without `schemaVersion` / `stepId` (ids are assigned at submit, so a
 * user cannot collide them) plus per-step orchestration fields.
 *
 * This is an edge where people type: every object is strict (a misspelt key is refused by name,
 * with the nearest valid key, instead of being dropped), and sizes are checked here, at submit,
 * so that nothing reaches Redis that the agent would refuse for its size.
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

// A job's steps run in their declared order: only the services mark steps parallel (the
// commands of a live sandbox), so a job file cannot.
const withoutIds = { schemaVersion: true, stepId: true, traceContext: true, parallel: true } as const;

const argument = withoutNul(byteBoundedString('an argument'), 'an argument');
/** A step's env, like the wire's, takes any name (without NUL): only its size is bounded here. */
const stepEnvName = withoutNul(byteBoundedString('an environment name'), 'an environment name');
const envValue = withoutNul(byteBoundedString('an environment value'), 'an environment value');

// Built from the wire's (lenient) step objects by shape, so only the job's copies are strict.
const JobRunStepSchema = strictObject(
  RunStepSchema.omit(withoutIds).extend({
    ...orchestration,
    // The wire bounds how many arguments; a job also bounds each one, and the environment.
    args: z
      .array(argument)
      .max(Limits.runMaxArgs, `a run step has at most ${Limits.runMaxArgs} arguments`)
      .nullish()
      .transform((a) => a ?? []),
    env: z.record(stepEnvName, envValue).nullish(),
  }).shape,
).superRefine((step, ctx) => {
  // The agent refuses stdin past runStdinMaxBytes once decoded; refuse it before it is queued.
  const bytes = stdinBytes(step);
  if (bytes > Limits.runStdinMaxBytes) {
    ctx.addIssue({
      code: 'custom',
      path: ['stdin'],
      message: overLimit('stdin', bytes, Limits.runStdinMaxBytes),
    });
  }
});
const JobReadFileStepSchema = strictObject(
  ReadFileStepSchema.omit(withoutIds).extend({ ...orchestration, timeoutSeconds: stepTimeout.optional() })
    .shape,
);
const JobWriteFileStepSchema = strictObject(
  WriteFileStepSchema.omit(withoutIds).extend({ ...orchestration, timeoutSeconds: stepTimeout.optional() })
    .shape,
).superRefine((step, ctx) => {
  // The agent refuses content past writeFileMaxBytes once decoded; refuse it before it is queued.
  const bytes = Buffer.byteLength(step.content, step.encoding === 'base64' ? 'base64' : 'utf8');
  if (bytes > Limits.writeFileMaxBytes) {
    ctx.addIssue({
      code: 'custom',
      path: ['content'],
      message: overLimit('content', bytes, Limits.writeFileMaxBytes),
    });
  }
});
const JobListFilesStepSchema = strictObject(
  ListFilesStepSchema.omit(withoutIds).extend({ ...orchestration, timeoutSeconds: stepTimeout.optional() })
    .shape,
);
const JobGrepStepSchema = strictObject(
  GrepStepSchema.omit(withoutIds).extend({ ...orchestration, timeoutSeconds: stepTimeout.optional() }).shape,
);

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

const envName = byteBoundedString('an environment name').regex(
  /^[A-Za-z_][A-Za-z0-9_]*$/,
  'environment variable names are letters, digits and _',
);

const quantity = (what: string, pattern: RegExp, example: string) =>
  z.string().regex(pattern, `${what} must look like ${example}`);
const cpu = quantity('cpu', /^(\d+(\.\d+)?|\d+m)$/, '"0.5", "2" or "500m"');
const memory = quantity('memory', /^\d+(\.\d+)?(Ki|Mi|Gi|Ti|K|M|G|T)?$/, '"512Mi" or "2Gi"');

/** Same shape and rules as libs/sandbox ResourcesSchema (kept here so the SDK needs no backend code). */
export const JobResourcesSchema = strictObject({
  requests: strictObject({ cpu: cpu.optional(), memory: memory.optional() }).optional(),
  limits: strictObject({ cpu: cpu.optional(), memory: memory.optional() }).optional(),
});

const labelKey = z
  .string()
  .regex(
    /^[A-Za-z0-9]([A-Za-z0-9_./-]{0,61}[A-Za-z0-9])?$/,
    'label keys are up to 63 letters, digits, "-_./"',
  );
const labelValue = z.string().max(63, 'label values are at most 63 characters');

/** Labels of a job or sandbox (they become backend labels, so Kubernetes' rules). */
export const labelsSchema = z.record(labelKey, labelValue);
/** Plain environment for a sandbox. Travels through Redis: never put secrets here. */
export const sandboxEnvSchema = z.record(envName, envValue);

/**
 * A secret a job or sandbox asks for by name. Only the name travels through Redis: the backend
 * resolves the value from its own store (a Kubernetes Secret's `key`; on Docker and in-process a
 * SANDSTREAM_SECRET_ variable), and only names on the operator's allow-list for the template or
 * the tenant are granted (the scheduler refuses others, naming them).
 */
export const SecretRefSchema = strictObject({
  secretName: z
    .string()
    .min(1, 'secretName must not be empty')
    .max(253, 'secretName is at most 253 characters'),
  /** The key inside a Kubernetes Secret; ignored elsewhere. */
  key: z.string().min(1).max(253).default('value'),
});
export const requestSecretEnvSchema = z.record(envName, SecretRefSchema);

export const JOB_MAX_STEPS = 1000;
export const JOB_MAX_TIMEOUT_SECONDS = 7 * 24 * 3600;
export const JOB_DEFAULT_TIMEOUT_SECONDS = 3600;

/** Keys people put in a job that belong elsewhere; said instead of a "did you mean". */
const jobKeyHints = {
  workingDirectory: 'a working directory is set per step (steps[].workingDirectory) or in the template',
  workdir: 'a working directory is set per step (steps[].workingDirectory) or in the template',
};

/**
 * The trace context the dispatcher may add to each step when it pushes it (the largest the wire
 * allows), so a step measured with it here still fits the wire when it is sent.
 */
const LARGEST_TRACE_CONTEXT = { traceparent: 'x'.repeat(512), tracestate: 'x'.repeat(1024) };

const StepsSchema = z
  .array(JobStepSchema)
  .min(1, 'a job needs at least one step')
  .max(JOB_MAX_STEPS, `a job has at most ${JOB_MAX_STEPS} steps`)
  .superRefine((steps, ctx) => {
    // Each step must fit one wire message, as the dispatcher will serialise it: the agent
    // refuses a larger one, and it would have been stored twice in Redis on the way. The fields
    // are measured unparsed (zod runs this even when a step broke another rule): the same
    // fields as the Step the dispatcher sends, so the same bytes.
    steps.forEach((step, index) => {
      const bytes = Buffer.byteLength(
        JSON.stringify(wireStepFields(step, index, LARGEST_TRACE_CONTEXT)),
        'utf8',
      );
      if (bytes > Limits.messageMaxBytes) {
        ctx.addIssue({
          code: 'custom',
          path: [index],
          message: overLimit('the step', bytes, Limits.messageMaxBytes, ' on the wire'),
          // Final: the whole spec's size would only say the same again, less precisely.
          continue: false,
        });
      }
    });
  });

/**
 * What a job and a live sandbox both ask for (one definition, so the two edges refuse and
 * default alike): its id, tenant, template or image, environment, secrets by name, resources,
 * labels, priority, lifetime (`timeoutSeconds`) and trace context.
 */
export const sandboxRequestFields = {
  /** Submitting the same id twice makes one job (or sandbox). Generated when absent. */
  id: JobIdSchema.optional(),
  tenant: TenantSchema.default('default'),
  /** A template name (libs/sandbox TemplateRegistry) … */
  template: z.string().min(1).max(253).optional(),
  /** … or an image; with both, the image overrides the template's. */
  image: z.string().min(1).max(1024).optional(),
  /** Plain environment for the sandbox. Travels through Redis: never put secrets here. */
  env: sandboxEnvSchema.default({}),
  /** Secrets by name (never their values), granted by the operator's allow-list. */
  secretEnv: requestSecretEnvSchema.optional(),
  resources: JobResourcesSchema.default({}),
  /** Wall-clock limit: a job's, queueing excluded; a live sandbox's lifetime from ready. */
  timeoutSeconds: z
    .number()
    .positive('timeoutSeconds must be positive')
    .max(JOB_MAX_TIMEOUT_SECONDS, `timeoutSeconds is at most ${JOB_MAX_TIMEOUT_SECONDS}`)
    .default(JOB_DEFAULT_TIMEOUT_SECONDS),
  /** 1 (lowest) … 100 (most urgent); among waiting requests the most urgent starts first. */
  priority: z
    .number()
    .int('priority must be an integer')
    .min(1, 'priority is at least 1')
    .max(100, 'priority is at most 100')
    .default(50),
  labels: labelsSchema.default({}),
  /** The tenant's volumes it mounts (docs/volumes.md): one writer per volume, readers share. */
  volumes: VolumeMountsSchema,
  traceContext: strictObject(TraceContextSchema.shape).optional(),
};

/** Refuses a spec whose JSON (what Redis will hold) is over jobSpecMaxBytes. */
export function boundedSpecSize(spec: unknown, ctx: z.RefinementCtx, what: string): void {
  const bytes = Buffer.byteLength(JSON.stringify(spec), 'utf8');
  if (bytes > Limits.jobSpecMaxBytes) {
    ctx.addIssue({ code: 'custom', message: overLimit(what, bytes, Limits.jobSpecMaxBytes) });
  }
}

export const JobSpecSchema = strictObject({ ...sandboxRequestFields, steps: StepsSchema }, jobKeyHints)
  .refine((spec) => spec.template !== undefined || spec.image !== undefined, {
    message: 'a job needs a template or an image',
    path: ['image'],
  })
  // The whole spec is stored as one JSON value; its size is what Redis holds for the job.
  .superRefine((spec, ctx) => boundedSpecSize(spec, ctx, 'the job spec'));

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
  return { ok: false, ...describeSpecIssues(parsed.error, 'job spec', source) };
}

/**
 * The one wording of a refused spec (job or sandbox): each field path and rule, after the source
 * (e.g. the file the CLI read) when there is one.
 */
export function describeSpecIssues(
  error: z.ZodError,
  what: string,
  source?: string,
): { error: string; issues: string[] } {
  const issues = error.issues.map((issue) => formatIssue(issue));
  const prefix = source ? `${source}: ` : '';
  return { error: `${prefix}invalid ${what}: ${issues.join('; ')}`, issues };
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
  return spec.steps.map((jobStep, index) => ({
    step: StepSchema.parse(wireStepFields(jobStep, index, traceContext)),
    continueOnError: jobStep.continueOnError,
    timeoutSeconds: jobStep.timeoutSeconds ?? Limits.runDefaultTimeoutSeconds,
    name: jobStep.name,
  }));
}

/** The fields of the i-th job step's wire Step: orchestration fields split off, version and id added. */
function wireStepFields(jobStep: JobStep, index: number, traceContext: Step['traceContext']) {
  const { continueOnError: _continueOnError, name: _name, ...rest } = jobStep;
  return {
    ...rest,
    schemaVersion: SCHEMA_VERSION,
    stepId: stepIdFor(index),
    ...(traceContext ? { traceContext } : {}),
  };
}
