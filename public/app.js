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
