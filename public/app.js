// Small enhancements; every page works without them.

// Show times in the viewer's time zone; the UTC time stays in the title for hovering.
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
