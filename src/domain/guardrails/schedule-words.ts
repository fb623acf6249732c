// A recurring freeze window in words, the same on the Settings page and on the command line:
// "every Fri 16:00 to Mon 08:00", "every Mon–Fri 18:00 to 08:00", "every day 22:00 to 06:00" when the
// cron opens at one time of some weekdays (or of every day), else the cron and its length.
import { parseWholeNumber } from '../whole-numbers.js'

const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat']
const WEEK_MINUTES = 7 * 24 * 60
const DAY_MINUTES = 24 * 60

const two = (n: number) => String(n).padStart(2, '0')
const clock = (minuteOfDay: number) => `${two(Math.floor(minuteOfDay / 60))}:${two(minuteOfDay % 60)}`

/** "2 d 16 h", "45 min": a length of time as people say it. */
export function durationWords(minutes: number): string {
  const parts = [
    [Math.floor(minutes / DAY_MINUTES), 'd'],
    [Math.floor((minutes % DAY_MINUTES) / 60), 'h'],
    [minutes % 60, 'min'],
  ] as const
  const said = parts.filter(([n]) => n > 0).map(([n, unit]) => `${n} ${unit}`)
  return said.length === 0 ? '0 min' : said.join(' ')
}

/** A day of the week in a cron field (0–7, Sunday both ends), or undefined. */
const day = (text: string) => parseWholeNumber(text, 0, 7)

/** A cron's day-of-week field as days: "5" → Fri, "1-5" → Mon–Fri, "0,6" → Sun, Sat; else null. */
function weekdays(field: string): string | null {
  const parts = field.split(',').map((part) => part.split('-').map(day))
  if (parts.some((range) => range.length > 2 || range.some((d) => d === undefined))) return null
  return parts.map((range) => range.map((d) => DAYS[(d ?? 0) % 7]).join('–')).join(', ')
}

/** A recurring window in words (see the module's head); the zone is the caller's to add. */
export function recurringWords(cron: string, durationMinutes: number): string {
  const fields = cron.trim().split(/\s+/)
  const [minuteText = '', hourText = '', dom, month, dow = ''] = fields
  const minute = parseWholeNumber(minuteText, 0, 59)
  const hour = parseWholeNumber(hourText, 0, 23)
  const days = dow === '*' ? 'day' : weekdays(dow)
  if (
    fields.length === 5 &&
    dom === '*' &&
    month === '*' &&
    minute !== undefined &&
    hour !== undefined &&
    days
  ) {
    const start = hour * 60 + minute
    const single = day(dow)
    if (single !== undefined && durationMinutes < WEEK_MINUTES) {
      const end = ((single % 7) * DAY_MINUTES + start + durationMinutes) % WEEK_MINUTES
      return `every ${days} ${clock(start)} to ${DAYS[Math.floor(end / DAY_MINUTES)]} ${clock(end % DAY_MINUTES)}`
    }
    if (durationMinutes < DAY_MINUTES) {
      return `every ${days} ${clock(start)} to ${clock((start + durationMinutes) % DAY_MINUTES)}`
    }
  }
  return `cron "${cron}" for ${durationWords(durationMinutes)}`
}
