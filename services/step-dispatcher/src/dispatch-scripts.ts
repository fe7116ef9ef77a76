import { busLua, luaDir } from '@sandstream/bus';

/**
 * The dispatcher's per-job state machine, kept in `dispatch:{jobId}` (a hash in the job's slot)
 * and changed only by these scripts (`src/lua/`), so every change is atomic with the LPUSH of
 * the step it implies. Fields: status (running|finished), n, cursor, current (running stepId or
 * ""), id:<i>, step:<i> (wire Step JSON), timeout:<i>, coe:<i> (continueOnError), outcome,
 * reason, startedAt, pushedAt:<i> (step-telemetry). Each StepResult is written to the job record
 * in the same script that pushes the next step (includes/job-record.lua, libs/bus), and the job
 * record's cancel flag is read there too: a cancel can never slip between "result recorded" and
 * "next step pushed".
 *
 * Replies are arrays whose first element says what happened:
 *   {'pushed', index, stepId, timeoutSeconds}   a step was LPUSHed now, or had been already
 *   {'finished', outcome, reason, newly}        the job is over (newly = 1 the first time)
 *   {'stale', currentStepId}                    the call named a step that is not the running one
 *                                               ('' for a finished job and a step not its own)
 *   {'missing'}                                 the result is not on the results list (yet)
 *   {'unknown'}                                 no dispatch state: never started or long expired
 *   {'signalled', stepId}                       a cancel was pushed for the running step
 *   {'opened'}                                  a live sandbox takes commands (dispatch-open)
 *   {'recorded', commandId}                     a live sandbox's command result is on its record
 *   {'later', atMs}                             a live sandbox is not idle; look again then
 *
 * A live sandbox's state also has live = 1 and idleMs; its commands are pushed by libs/bus
 * sandbox-exec, not here (they run side by side, so none waits for another's result).
 */
const lua = busLua.extend(luaDir(import.meta.url));

export const startScript = lua.load('dispatch-start');
export const advanceScript = lua.load('dispatch-advance');
export const finishScript = lua.load('dispatch-finish');
export const cancelScript = lua.load('dispatch-cancel');
export const claimDueScript = lua.load('claim-due-deadlines');
export const openScript = lua.load('dispatch-open');
export const idleScript = lua.load('dispatch-idle');
