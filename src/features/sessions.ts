// Browser sessions: expired ones are deleted once an hour (the pages and routes that use sessions
// are the web UI's).
import fp from 'fastify-plugin'
import { deleteExpiredSessions } from '../domain/sessions.js'

export const sessions = fp(
  async (app) => {
    const { db } = app.database
    app.tasks.add({
      name: 'session-cleanup',
      intervalMs: 60 * 60 * 1000,
      run: async () => void (await deleteExpiredSessions(db)),
    })
  },
  { name: 'sessions', dependencies: ['platform'] },
)
