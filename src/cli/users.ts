// shiplog users create|set-password and accounts password-login: thin callers of the audited
// domain commands, which write the change and its audit entry together.
import { parseArgs } from 'node:util'
import { accountNameProblem, emailProblem, findUserInAccount, UserExistsError } from '../domain/accounts.js'
import { cliSource } from '../domain/audit/log.js'
import { setPasswordLogin } from '../domain/identity/provisioning.js'
import { hashedPassword, passwordProblem } from '../domain/passwords.js'
import { createUserAudited, resetPasswordAudited } from '../domain/users/commands.js'
import { isUserRole, printableName, USER_ROLES } from '../text-rules.js'
import { CliError, withDatabase } from './common.js'
import { accountAndPositionals, accountOrFail, required } from './options.js'

async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) {
    process.stderr.write('Password (input is shown; end with Enter, then Ctrl-D): ')
  }
  const chunks: Buffer[] = []
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString('utf8')
}

/** The password from standard input, checked; one trailing newline (from echo or a terminal) is not part of it. */
async function passwordFromStdin(): Promise<string> {
  const password = (await readStdin()).replace(/\r?\n$/, '')
  const badPassword = passwordProblem(password)
  if (badPassword) throw new CliError(`password ${badPassword}`)
  return password
}

export async function usersCreate(args: string[]): Promise<void> {
  const usage = 'shiplog users create --account NAME --email EMAIL --password-stdin [--role admin|member]'
  const { values } = parseArgs({
    args,
    options: {
      account: { type: 'string' },
      email: { type: 'string' },
      'password-stdin': { type: 'boolean' },
      role: { type: 'string', default: 'admin' },
    },
    strict: true,
  })
  const account = required(values, 'account', usage)
  const email = required(values, 'email', usage)
  if (!values['password-stdin']) throw new CliError(`--password-stdin is required (${usage})`, 2)
  const role = values.role
  if (!isUserRole(role)) throw new CliError(`--role must be ${USER_ROLES.join(' or ')}, got "${role}"`, 2)
  const accountProblem = accountNameProblem(account)
  if (accountProblem) throw new CliError(`--account ${accountProblem}`, 2)
  const badEmail = emailProblem(email)
  if (badEmail) throw new CliError(`--email ${badEmail}`, 2)
  const password = await passwordFromStdin()

  // Hashed before the transaction: it would otherwise hold the write lock of a new account's row
  // through the hash, and a server on the same file waits for that with its event loop stopped.
  const hashed = await hashedPassword(password)
  await withDatabase(async ({ db }) => {
    try {
      // The account is created with the user, or not at all.
      const user = await createUserAudited(
        db,
        { name: account },
        { email, password: hashed, role, via: 'shiplog users create' },
        cliSource(),
      )
      process.stderr.write(`created ${user.role} ${user.email} in account "${account.trim()}"\n`)
    } catch (err) {
      if (err instanceof UserExistsError) throw new CliError(err.message)
      throw err
    }
  })
}

export async function usersSetPassword(args: string[]): Promise<void> {
  const usage = 'shiplog users set-password --account NAME --email EMAIL --password-stdin [--one-time]'
  const { values } = parseArgs({
    args,
    options: {
      account: { type: 'string' },
      email: { type: 'string' },
      'password-stdin': { type: 'boolean' },
      'one-time': { type: 'boolean', default: false },
    },
    strict: true,
  })
  const accountName = required(values, 'account', usage)
  const email = required(values, 'email', usage)
  if (!values['password-stdin']) throw new CliError(`--password-stdin is required (${usage})`, 2)
  const badEmail = emailProblem(email)
  if (badEmail) throw new CliError(`--email ${badEmail}`, 2)
  const password = await passwordFromStdin()

  await withDatabase(async (database) => {
    const account = await accountOrFail(database, accountName)
    const user = await findUserInAccount(database.db, account.id, email)
    const oneTime = values['one-time'] === true
    const hashed = await hashedPassword(password)
    const how = oneTime ? 'shiplog users set-password --one-time' : 'shiplog users set-password'
    const reset =
      user &&
      (await resetPasswordAudited(database.db, account.id, user.id, hashed, { oneTime, how }, cliSource()))
    if (reset === undefined) {
      throw new CliError(
        `account "${printableName(account.name)}" has no user ${printableName(email.trim())}`,
      )
    }
    process.stderr.write(
      `set a ${oneTime ? 'one-time ' : ''}password for ${printableName(reset)} in account "${printableName(account.name)}"; their sessions are ended\n`,
    )
  })
}

export async function accountsPasswordLogin(args: string[]): Promise<void> {
  const usage = 'shiplog accounts password-login --account NAME on|off'
  const { accountName, positionals } = accountAndPositionals(args, usage)
  const [wanted, ...extra] = positionals
  if ((wanted !== 'on' && wanted !== 'off') || extra.length > 0) {
    throw new CliError(`say on or off (${usage})`, 2)
  }
  await withDatabase(async (database) => {
    const account = await accountOrFail(database, accountName)
    const changed = await setPasswordLogin(database.db, account.id, wanted === 'on', cliSource())
    process.stderr.write(
      `password login for account "${printableName(account.name)}" ${changed ? 'is now' : 'was already'} ${wanted}\n`,
    )
  })
}
