// PLACEHOLDER (replaced by the freeze calendar on branch guardrails-freeze before this lands).
import type { FieldError } from '../events/event.js'

export interface RecurringWindow {
  cron: string
  durationMinutes: number
  timeZone: string
}
export interface OneOffWindow {
  startsAt: number
  endsAt: number
}
export interface Occurrence {
  start: number
  end: number
}

export function parseWeeklyRange(
  _text: string,
): { ok: true; value: { cron: string; durationMinutes: number } } | { ok: false; errors: string[] } {
  return { ok: false, errors: ['not yet'] }
}
export function validateRecurring(_spec: RecurringWindow): string[] {
  return []
}
export function activeOccurrence(_spec: RecurringWindow, _at: number): Occurrence | null {
  return null
}
export function nextOccurrence(_spec: RecurringWindow, _after: number): Occurrence | null {
  return null
}
export function windowsOverlap(
  _a: RecurringWindow | OneOffWindow,
  _b: RecurringWindow | OneOffWindow,
  _from: number,
  _horizonDays: number,
): Occurrence | null {
  return null
}
export type { FieldError }
