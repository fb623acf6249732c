// Standard 5-field cron expressions (Vixie semantics): parsing with one message per bad field, the
// wall-clock times they match (counted as if UTC, for a time zone on top), and weekly ranges as cron.

export interface CronSchedule {
  /** Minutes of the local day (0–1439) at which it fires on a matching day, ascending. */
  readonly timesOfDay: readonly number[]
  readonly minutes: readonly number[]
  readonly hours: readonly number[]
  /** Indexed 1–31, 1–12 and 0–6 (Sunday 0). */
  readonly daysOfMonth: readonly boolean[]
  readonly months: readonly boolean[]
  readonly daysOfWeek: readonly boolean[]
  /** Vixie: a day field written starting with `*` does not restrict; only two restricting fields are ORed. */
  readonly dayOfMonthStar: boolean
  readonly dayOfWeekStar: boolean
}

export type Checked<T> = { ok: true; value: T } | { ok: false; errors: string[] }
export type CronParse = Checked<CronSchedule>

interface FieldRule {
  name: string
  min: number
  max: number
  names?: readonly string[]
  nameHint?: string
}

const FIELD_NAMES = 'minute hour day-of-month month day-of-week'
const MONTH_NAMES = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec']
const DAY_NAMES = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat']
const FIELDS: readonly FieldRule[] = [
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day-of-month', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12, names: ['', ...MONTH_NAMES], nameHint: 'a month name jan–dec' },
  { name: 'day-of-week', min: 0, max: 7, names: DAY_NAMES, nameHint: 'a day name sun–sat' },
]
const MACROS: Readonly<Record<string, string>> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
}

/** Reads a cron expression; every bad field gets its own message naming the field and its range. */
export function parseCron(text: string): CronParse {
  const trimmed = text.trim()
  const fields = (MACROS[trimmed.toLowerCase()] ?? trimmed).split(/\s+/).filter((f) => f.length > 0)
  if (fields.length !== 5) {
    const count =
      fields.length === 0 ? 'is empty' : `has ${fields.length} field${fields.length === 1 ? '' : 's'}`
    return { ok: false, errors: [`the expression ${count}; a cron expression has 5 (${FIELD_NAMES})`] }
  }
  const errors: string[] = []
  const sets = FIELDS.map((rule, index) => {
    const parsed = parseField(fields[index] ?? '', rule)
    if (typeof parsed === 'string') errors.push(`${rule.name}: ${parsed}`)
    return typeof parsed === 'string' ? [] : parsed
  })
  if (errors.length > 0) return { ok: false, errors }
  const [minutes = [], hours = [], daysOfMonth = [], months = [], weekdays = []] = sets
  const daysOfWeek = flags(
    weekdays.map((d) => d % 7),
    7,
  )
  return {
    ok: true,
    value: {
      timesOfDay: hours.flatMap((h) => minutes.map((m) => h * 60 + m)),
      minutes,
      hours,
      daysOfMonth: flags(daysOfMonth, 32),
      months: flags(months, 13),
      daysOfWeek,
      dayOfMonthStar: fields[2]?.startsWith('*') ?? true,
      dayOfWeekStar: fields[4]?.startsWith('*') ?? true,
    },
  }
}

function flags(values: readonly number[], size: number): boolean[] {
  const out = new Array<boolean>(size).fill(false)
  for (const v of values) out[v] = true
  return out
}

/** The sorted values a field allows, or a message saying what is wrong with it. */
function parseField(field: string, rule: FieldRule): number[] | string {
  const chosen = new Set<number>()
  for (const item of field.split(',')) {
    if (item.length === 0) return `"${field}" has an empty item between commas`
    const [range = '', stepText, extra] = item.split('/')
    if (extra !== undefined) return `"${item}" has more than one "/"`
    let step = 1
    if (stepText !== undefined) {
      step = /^\d+$/.test(stepText) ? Number(stepText) : Number.NaN
      if (!(step >= 1 && step <= rule.max - rule.min + 1))
        return `the step in "${item}" must be a whole number from 1 to ${rule.max - rule.min + 1}`
    }
    let low: number
    let high: number
    if (range === '*') {
      low = rule.min
      high = rule.max
    } else {
      const [first = '', last, more] = range.split('-')
      if (more !== undefined) return `"${item}" has more than one "-"`
      const from = value(first, rule)
      if (typeof from === 'string') return from
      const to = last === undefined ? (stepText === undefined ? from : rule.max) : value(last, rule)
      if (typeof to === 'string') return to
      if (to < from) return `the range ${range} runs backwards (${rule.min}–${rule.max}, low to high)`
      low = from
      high = to
    }
    for (let v = low; v <= high; v += step) chosen.add(v)
  }
  return [...chosen].sort((a, b) => a - b)
}

function value(text: string, rule: FieldRule): number | string {
  const named = rule.names?.indexOf(text.toLowerCase()) ?? -1
  if (named >= 0 && text.length > 0) return named
  if (!/^\d+$/.test(text)) {
    const also = rule.nameHint ? ` or ${rule.nameHint}` : ''
    return `"${text}" is not a number in ${rule.min}–${rule.max}${also}`
  }
  const n = Number(text)
  if (n < rule.min || n > rule.max) return `${n} is out of range ${rule.min}–${rule.max}`
  return n
}

const DAY = 86_400_000

/** Whether the schedule fires on the date of `wall` (a wall-clock time counted as if UTC). */
export function cronMatchesDay(schedule: CronSchedule, wall: number): boolean {
  const date = new Date(wall)
  if (!schedule.months[date.getUTCMonth() + 1]) return false
  const byMonthDay = schedule.daysOfMonth[date.getUTCDate()] === true
  const byWeekday = schedule.daysOfWeek[date.getUTCDay()] === true
  if (schedule.dayOfMonthStar || schedule.dayOfWeekStar) return byMonthDay && byWeekday
  return byMonthDay || byWeekday
}

/** The wall-clock times (whole minutes, as if UTC) the schedule matches in (low, high], in order. */
export function* cronWalls(
  schedule: CronSchedule,
  low: number,
  high: number,
  direction: 'up' | 'down',
): Generator<number> {
  const times = schedule.timesOfDay
  if (times.length === 0 || high <= low) return
  const firstDay = Math.floor(low / DAY)
  const lastDay = Math.floor(high / DAY)
  for (let i = 0; i <= lastDay - firstDay; i++) {
    const day = (direction === 'up' ? firstDay + i : lastDay - i) * DAY
    if (!cronMatchesDay(schedule, day)) continue
    // Only the edge days are cut, so a dense schedule costs no more than the times asked for.
    const from = firstAbove(times, (low - day) / 60_000)
    const to = firstAbove(times, Math.floor((high - day) / 60_000))
    for (let j = 0; j < to - from; j++)
      yield day + (times[direction === 'up' ? from + j : to - 1 - j] ?? 0) * 60_000
  }
}

/** The index of the first of the ascending `values` above `limit`. */
function firstAbove(values: readonly number[], limit: number): number {
  let low = 0
  let high = values.length
  while (low < high) {
    const middle = (low + high) >> 1
    if ((values[middle] ?? 0) > limit) high = middle
    else low = middle + 1
  }
  return low
}

/** A short description such as "at 16:00 on Fri" or "every 15 minutes", for lists and hints. */
export function describeCron(schedule: CronSchedule): string {
  const { minutes, hours, timesOfDay } = schedule
  const pad = (n: number) => String(n).padStart(2, '0')
  let time: string
  const step = minutes.length > 1 ? (minutes[1] ?? 0) - (minutes[0] ?? 0) : 0
  const evenly = minutes[0] === 0 && minutes.every((m, i) => m === i * step) && 60 % step === 0
  if (timesOfDay.length <= 4)
    time = `at ${timesOfDay.map((t) => `${pad(Math.floor(t / 60))}:${pad(t % 60)}`).join(', ')}`
  else if (hours.length === 24 && minutes.length === 60) time = 'every minute'
  else if (hours.length === 24 && evenly) time = `every ${step} minutes`
  else if (hours.length === 24) time = `at minutes ${minutes.join(', ')} of every hour`
  else time = `at minutes ${minutes.join(', ')} past hours ${hours.join(', ')}`
  const pick = (all: readonly boolean[], names: readonly string[], from: number) =>
    names.filter((_, i) => all[i + from]).join(', ')
  const weekdays = pick(schedule.daysOfWeek, ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'], 0)
  const monthDays = schedule.daysOfMonth.flatMap((on, d) => (on ? [String(d)] : [])).join(', ')
  const byMonthDay = schedule.daysOfMonth.slice(1).some((on) => !on)
  const byWeekday = schedule.daysOfWeek.some((on) => !on)
  const parts = [time]
  if (byMonthDay) parts.push(`on day ${monthDays} of the month`)
  if (byWeekday) {
    const either = byMonthDay && !schedule.dayOfMonthStar && !schedule.dayOfWeekStar
    parts.push(`${either ? 'or' : byMonthDay ? 'and' : 'on'} ${weekdays.replace(/^(.*), /, '$1 and ')}`)
  }
  const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']
  if (schedule.months.slice(1).some((on) => !on)) parts.push(`in ${pick(schedule.months, months, 1)}`)
  return parts.join(' ')
}

// --- Weekly ranges people write, turned into a cron and a duration.

/** Each weekday's spellings, Sunday first (cron numbers them from Sunday 0). */
const DAY_WORDS: readonly (readonly string[])[] = [
  ['sun', 'sunday'],
  ['mon', 'monday'],
  ['tue', 'tues', 'tuesday'],
  ['wed', 'wednesday'],
  ['thu', 'thur', 'thurs', 'thursday'],
  ['fri', 'friday'],
  ['sat', 'saturday'],
]
const WEEKLY_EXAMPLES = 'e.g. "Fri 16:00-Mon 08:00", "Mon-Fri 18:00-08:00" or "daily 22:00-06:00"'

/**
 * Reads "Fri 16:00-Mon 08:00" (one span a week), "Mon-Fri 18:00-08:00" (each of those days until
 * the next morning) or "daily 22:00-06:00" into a cron and a duration in wall-clock minutes.
 */
export function parseWeeklyRange(text: string): Checked<{ cron: string; durationMinutes: number }> {
  const written = text
    .trim()
    .toLowerCase()
    .replace(/\s+/g, ' ')
    .replace(/ ?([-,]) ?/g, '$1')
  const normal = written.replace(/^every ?day\b/, 'daily').replace(/^weekdays\b/, 'mon-fri')
  const span = /^([a-z]+) (\d{1,2}:\d{2})-([a-z]+) (\d{1,2}:\d{2})$/.exec(normal)
  const nightly = /^([a-z,-]+) (\d{1,2}:\d{2})-(\d{1,2}:\d{2})$/.exec(normal)
  if (!span && !nightly)
    return { ok: false, errors: [`"${text.trim()}" is not a weekly range; write it as ${WEEKLY_EXAMPLES}`] }
  const errors: string[] = []
  const [, startDays = '', startText = '', endDay, endText = ''] = span ?? nightly ?? []
  const days = startDays === 'daily' ? null : daySet(startDays, errors)
  const endWeekday = span ? daySet(endDay ?? '', errors) : null
  const start = timeOfDay(startText, false, errors)
  const end = timeOfDay(span ? endText : (nightly?.[3] ?? ''), true, errors)
  if (errors.length > 0 || start === undefined || end === undefined) return { ok: false, errors }
  let durationMinutes = end - start
  if (span) {
    if ((days?.length ?? 0) !== 1 || (endWeekday?.length ?? 0) !== 1)
      return { ok: false, errors: [`"${text.trim()}" must name one day on each side, ${WEEKLY_EXAMPLES}`] }
    durationMinutes += (((endWeekday?.[0] ?? 0) - (days?.[0] ?? 0) + 7) % 7) * 1440
    if (durationMinutes < 0) durationMinutes += 7 * 1440
  } else if (durationMinutes < 0) durationMinutes += 1440
  if (durationMinutes === 0)
    return { ok: false, errors: [`"${text.trim()}" is empty: it ends when it starts`] }
  const weekdays = days === null ? '*' : weekdayField(days)
  return {
    ok: true,
    value: { cron: `${start % 60} ${Math.floor(start / 60)} * * ${weekdays}`, durationMinutes },
  }
}

/** The weekdays (Sunday 0) a list such as "mon-fri" or "sat,sun" names; ranges may wrap ("fri-mon"). */
function daySet(words: string, errors: string[]): number[] | null {
  const chosen = new Set<number>()
  for (const item of words.split(',')) {
    const [from = '', to, more] = item.split('-')
    const first = weekdayNamed(from)
    const last = to === undefined ? first : weekdayNamed(to)
    if (first < 0 || last < 0 || more !== undefined) {
      errors.push(`"${item}" is not a day or a range of days (Mon–Sun, Monday–Sunday, or daily)`)
      return null
    }
    for (let d = first; ; d = (d + 1) % 7) {
      chosen.add(d)
      if (d === last) break
    }
  }
  return [...chosen].sort((x, y) => x - y)
}

function weekdayNamed(word: string): number {
  return DAY_WORDS.findIndex((spellings) => spellings.includes(word))
}

function weekdayField(days: readonly number[]): string {
  const runs: string[] = []
  for (let i = 0; i < days.length; ) {
    let j = i
    while (j + 1 < days.length && days[j + 1] === (days[j] ?? 0) + 1) j++
    runs.push(j > i ? `${days[i]}-${days[j]}` : `${days[i]}`)
    i = j + 1
  }
  return runs.join(',')
}

/** Minutes after midnight; "24:00" is allowed as an end, for a window that lasts to midnight. */
function timeOfDay(text: string, isEnd: boolean, errors: string[]): number | undefined {
  const [hours = 0, minutes = 0] = text.split(':').map(Number)
  if ((hours === 24 && minutes === 0 && isEnd) || (hours <= 23 && minutes <= 59)) return hours * 60 + minutes
  errors.push(`"${text}" is not a time of day (00:00–23:59)`)
  return undefined
}
