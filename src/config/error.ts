// The one error a bad configuration raises, apart so every config module can raise it.

/** A configuration problem: the message is meant to be shown to the operator as is. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError'
}
