// Counts in words: "1 minute", "2 minutes", "0 events". Every message that puts a number before a
// noun builds it here, so none says "1 minutes".

/** `n` and the noun, singular for exactly one; `many` defaults to the noun with an "s". */
export function counted(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`
}
