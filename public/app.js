// Small enhancements; every page works without them.

// One time zone on the page, the viewer's: rows, the filter summary and the From/To fields. The UTC
// time stays in each <time>'s title for hovering; without this script everything says UTC.
const zone = Intl.DateTimeFormat().resolvedOptions().timeZone
// Sent with the filter form, so From and To typed in this zone are read in it.
for (const field of document.querySelectorAll('input[data-viewer-zone]')) field.value = zone
for (const label of document.querySelectorAll('[data-zone-label]')) label.textContent = `(${zone})`
for (const note of document.querySelectorAll('[data-zone-note]')) {
  note.textContent = `Times are in your time zone, ${zone}; hover over one for UTC.`
}
// A From/To field holding an instant (from a link, in UTC) shows it as this zone's wall time.
const wallTime = new Intl.DateTimeFormat('en-CA', {
  timeZone: zone,
  hourCycle: 'h23',
  year: 'numeric',
  month: '2-digit',
  day: '2-digit',
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
})
for (const input of document.querySelectorAll('input[data-utc]')) {
  const at = new Date(input.dataset.utc)
  if (Number.isNaN(at.getTime())) continue
  const part = Object.fromEntries(wallTime.formatToParts(at).map((p) => [p.type, p.value]))
  input.value = `${part.year}-${part.month}-${part.day}T${part.hour}:${part.minute}:${part.second}`
}

// On a phone the filter box starts folded (its summary names the active filters), unless it holds
// an error to fix. Without this script it stays open.
if (window.matchMedia('(max-width: 40rem)').matches && !document.getElementById('filter-errors')) {
  for (const box of document.querySelectorAll('details[data-collapse-on-phone]')) box.open = false
}

const formatter = new Intl.DateTimeFormat(undefined, {
  year: 'numeric',
  month: 'short',
  day: '2-digit',
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
})
for (const el of document.querySelectorAll('time[data-local]')) {
  const at = new Date(el.getAttribute('datetime'))
  if (!Number.isNaN(at.getTime())) el.textContent = formatter.format(at)
}
// The end of a lock or freeze, short: "Mon 08:00" within six days, else "24 Dec 18:00", in this zone.
const weekdayTime = new Intl.DateTimeFormat(undefined, {
  weekday: 'short',
  hour: '2-digit',
  minute: '2-digit',
})
const dateTime = new Intl.DateTimeFormat(undefined, {
  day: 'numeric',
  month: 'short',
  hour: '2-digit',
  minute: '2-digit',
})
for (const el of document.querySelectorAll('time[data-local-short]')) {
  const at = new Date(el.getAttribute('datetime'))
  if (Number.isNaN(at.getTime())) continue
  const near = Math.abs(at.getTime() - Date.now()) < 6 * 86_400_000
  el.textContent = (near ? weekdayTime : dateTime).format(at)
  el.title = `${formatter.format(at)} (${el.title})`
}

// Copy buttons: data-copy names the element whose text is copied.
for (const button of document.querySelectorAll('button[data-copy]')) {
  button.hidden = false
  button.addEventListener('click', async () => {
    const source = document.getElementById(button.dataset.copy)
    const status = document.getElementById(`${button.dataset.copy}-status`)
    if (!source) return
    try {
      await navigator.clipboard.writeText(source.textContent.trim())
      if (status) status.textContent = 'Copied to the clipboard.'
    } catch {
      const range = document.createRange()
      range.selectNodeContents(source)
      const selection = window.getSelection()
      selection.removeAllRanges()
      selection.addRange(range)
      if (status) status.textContent = 'Selected: press Ctrl+C (⌘C) to copy.'
    }
  })
}

// ==== Board: relative times ("5 min ago") kept fresh; the exact local time (and UTC) on hover. ====
// The board as it was at an instant counts back from that instant, not from now.
const relativeBase = Date.parse(document.querySelector('[data-relative-base]')?.dataset.relativeBase ?? '')
function relative(ms) {
  const seconds = Math.round(((Number.isNaN(relativeBase) ? Date.now() : relativeBase) - ms) / 1000)
  if (seconds < 60) return seconds < 0 ? 'just now' : `${seconds} s ago`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 60) return `${minutes} min ago`
  const hours = Math.floor(minutes / 60)
  if (hours < 48) return `${hours} h ago`
  return `${Math.floor(hours / 24)} days ago`
}
const relatives = document.querySelectorAll('time[data-relative]')
// The local time on hover, for the page's times and for those a live update draws.
function dressRelatives(root) {
  for (const el of root.querySelectorAll('time[data-relative]')) {
    const at = new Date(el.getAttribute('datetime'))
    if (!Number.isNaN(at.getTime())) el.title = `${formatter.format(at)} (${el.title})`
  }
}
dressRelatives(document)
function refreshRelatives() {
  for (const el of document.querySelectorAll('time[data-relative]')) {
    const at = new Date(el.getAttribute('datetime')).getTime()
    if (!Number.isNaN(at)) el.textContent = relative(at)
  }
}
if ((relatives.length > 0 || document.querySelector('[data-live-board]')) && Number.isNaN(relativeBase))
  setInterval(refreshRelatives, 30_000)
// ==== end of board section ====
// ---- Insights (/insights/) ----
// Days are bucketed on the server in the zone the query names: a first visit without one is sent
// once more with the viewer's zone, so the charts' days are the viewer's days. Without this script
// the page counts days in UTC and says so.
if (document.querySelector('[data-zone-redirect]') && zone && zone !== 'UTC') {
  const url = new URL(window.location.href)
  if (!url.searchParams.get('tz')) {
    url.searchParams.set('tz', zone)
    window.location.replace(url.toString())
  }
}
// Typing a From or To date means a custom range.
const insightsRange = document.getElementById('i-range')
for (const id of ['i-from', 'i-to']) {
  document.getElementById(id)?.addEventListener('change', () => {
    if (insightsRange) insightsRange.value = 'custom'
  })
}
// ---- end Insights ----
// ---- Live updates (/logs/ and the board) ----
// New events arrive over server-sent events (GET /api/v1/stream, with the session cookie). The
// unfiltered first page of the log gets them as rows; other log pages get a bar that reloads; the
// board redraws the row of the service with the server's own row (GET /board/row: sender, alerts
// and the "≠" marks, which depend on the whole row), or offers a reload when the change has no
// cell here. Without this script (or EventSource) the pages are as before.
const liveLogs = document.querySelector('[data-live-logs]')
const liveBoard = document.querySelector('[data-live-board] table.board')
if ((liveLogs || liveBoard) && 'EventSource' in window) {
  const bar = liveLogs ?? liveBoard.closest('[data-live-board]')?.previousElementSibling
  let unseen = 0
  const announce = (text) => {
    if (!bar) return
    bar.replaceChildren()
    const p = document.createElement('p')
    p.append(`${text} `)
    const link = document.createElement('a')
    link.href = window.location.href
    link.textContent = 'Show'
    p.append(link)
    bar.append(p)
    bar.hidden = false
  }
  const el = (tag, className, text) => {
    const node = document.createElement(tag)
    if (className) node.className = className
    if (text !== undefined) node.textContent = text
    return node
  }
  const logRow = (event) => {
    const tr = el('tr', 'live-new')
    const at = new Date(event.received_at)
    const time = el('time', '', formatter.format(at))
    time.dateTime = event.received_at
    time.title = `${event.received_at.slice(0, 19).replace('T', ' ')} UTC`
    const cell = (child, className) => {
      const td = el('td', className)
      td.append(child)
      tr.append(td)
      return td
    }
    cell(time)
    cell(event.service)
    cell(event.environment)
    cell(event.version, 'mono')
    cell(el('span', `badge ${event.status}`, event.status))
    cell(event.source)
    cell(event.api_key_name ?? '—')
    const details = cell('')
    if (event.url && /^https?:\/\//i.test(event.url)) {
      const a = el('a', '', 'link')
      a.href = event.url
      a.rel = 'noopener noreferrer nofollow'
      details.append(a)
    }
    if (event.commit) {
      const commit = el('span', 'mono', event.commit.slice(0, 12))
      commit.title = 'commit'
      details.append(' ', commit)
    }
    if (event.description) details.append(el('div', 'hint', event.description))
    if (event.deployer) details.append(el('div', 'hint', `by ${event.deployer}`))
    return tr
  }
  const boardRow = (service) => {
    for (const row of liveBoard.tBodies[0]?.rows ?? []) if (row.dataset.service === service) return row
    return null
  }
  const columnsOf = (row) => [...row.cells].map((td) => td.dataset.environment ?? '').join('\u0000')
  // Per service: the environments changed since its row was last fetched, and whether a fetch is
  // under way (one at a time, the last one wins: a burst of deployments ends with the newest row).
  const changedEnvironments = new Map()
  const fetching = new Set()
  const refreshRow = async (service) => {
    if (fetching.has(service)) return
    fetching.add(service)
    try {
      while (changedEnvironments.has(service)) {
        const changed = changedEnvironments.get(service)
        changedEnvironments.delete(service)
        const res = await fetch(`/board/row?service=${encodeURIComponent(service)}`, {
          credentials: 'same-origin',
          headers: { accept: 'text/html' },
        })
        const template = document.createElement('template')
        template.innerHTML = res.ok && !res.redirected ? (await res.text()).trim() : ''
        const fresh = template.content.querySelector('tr')
        const old = boardRow(service)
        // A column the page does not have (or the row is gone): the page is out of date.
        if (!fresh || !old || columnsOf(fresh) !== columnsOf(old)) {
          announce('The board has changed.')
          return
        }
        ;[...fresh.cells].forEach((td, i) => {
          if (changed.has(td.dataset.environment) || old.cells[i]?.classList.contains('live-changed'))
            td.classList.add('live-changed')
        })
        dressRelatives(fresh)
        old.replaceWith(fresh)
      }
    } catch {
      announce('The board has changed.')
    } finally {
      fetching.delete(service)
    }
  }
  const updateCell = (deployment) => {
    const row = boardRow(deployment.service)
    const td = row && [...row.cells].find((c) => c.dataset.environment === deployment.environment)
    if (!td) {
      announce('The board has changed.')
      return
    }
    const changed = changedEnvironments.get(deployment.service) ?? new Set()
    changed.add(deployment.environment)
    changedEnvironments.set(deployment.service, changed)
    void refreshRow(deployment.service)
  }
  // From the newest event the page lists (EventSource's own Last-Event-ID wins on reconnects), and
  // only the events the page's filters select: the server matches them as it lists the page.
  const streamQuery = new URLSearchParams(liveLogs?.dataset.liveFilter ?? '')
  const since = liveLogs?.dataset.liveSince
  if (since) streamQuery.set('lastEventId', since)
  const query = streamQuery.toString()
  const source = new EventSource(query ? `/api/v1/stream?${query}` : '/api/v1/stream')
  source.addEventListener('event', (message) => {
    if (!liveLogs) return
    const event = JSON.parse(message.data)
    const body =
      liveLogs.dataset.liveLogs === 'prepend' ? document.querySelector('tbody[data-live-prepend]') : null
    if (body) {
      body.prepend(logRow(event))
    } else {
      unseen++
      announce(unseen === 1 ? '1 new event.' : `${unseen} new events.`)
    }
  })
  source.addEventListener('deployment', (message) => {
    if (liveBoard) updateCell(JSON.parse(message.data))
  })
  source.addEventListener('reset', (message) =>
    announce(
      JSON.parse(message.data).cause === 'ahead'
        ? 'The server’s event history changed (restored from a backup?).'
        : 'Many events arrived while the page was not listening.',
    ),
  )
  // The key or session ended (logged out, password changed, user removed): stop, and say so.
  source.addEventListener('revoked', () => {
    source.close()
    if (!bar) return
    bar.replaceChildren()
    const p = document.createElement('p')
    p.append('Live updates stopped: you are signed out. ')
    const link = document.createElement('a')
    link.href = `/login?next=${encodeURIComponent(window.location.pathname + window.location.search)}`
    link.textContent = 'Sign in again'
    p.append(link)
    bar.append(p)
    bar.hidden = false
  })
  // Leaving the page closes the stream at once rather than when the browser gets round to it.
  window.addEventListener('pagehide', () => source.close())
}
// ---- end Live updates ----

// "CSV for Excel": without this script the box is a form back to the page, which then links to the
// CSV with bom=1; with it, the Download CSV link follows the box at once.
for (const form of document.querySelectorAll('form[data-bom-form]')) {
  const box = form.querySelector('input[data-bom-toggle]')
  const link = form.closest('.downloads')?.querySelector('a[data-bom-link]')
  const apply = form.querySelector('[data-bom-apply]')
  if (!box || !link) continue
  if (apply) apply.hidden = true
  box.addEventListener('change', () => {
    const url = new URL(link.getAttribute('href'), window.location.href)
    if (box.checked) url.searchParams.set('bom', '1')
    else url.searchParams.delete('bom')
    link.setAttribute('href', `${url.pathname}${url.search}`)
  })
}
