/**
 * The Redis behind a sweep queue: its URL (`redis://[USER:PASSWORD@]HOST[:PORT][/DB]`, `rediss://`
 * for TLS), a check that it answers before any work, and the ioredis clients BullMQ runs on.
 *
 * @module
 */
import { Redis } from 'ioredis'
import { QueueConnectionError, QueueUrlError } from './errors.ts'

/**
 * A parsed queue URL.
 *
 * @category Queue
 */
export interface QueueUrl {
  /** The URL as given. */
  readonly url: string
  /** The URL with its password replaced by `***` (what messages and logs show). */
  readonly display: string
  readonly host: string
  /** TCP port (default 6379). */
  readonly port: number
  /** Redis database index (default 0). */
  readonly db: number
  readonly username?: string
  readonly password?: string
  /** `rediss://`: connect with TLS. */
  readonly tls: boolean
}

const EXPECTED = 'expected redis://HOST:PORT/DB (rediss:// for TLS), e.g. redis://127.0.0.1:6379/0'

/**
 * Parses a queue URL: `redis://` or `rediss://`, a host, an optional port (1-65535, default 6379),
 * an optional database index (`/0`, `/3`; default 0), optional `USER:PASSWORD@`. Nothing else
 * (no query, no fragment, no path below the database).
 *
 * @param url - the URL as given (`--queue`)
 * @returns its parts
 * @throws {@link QueueUrlError} for anything else
 * @example
 * ```ts
 * parseQueueUrl('redis://10.0.0.5:6379/2') // { host: '10.0.0.5', port: 6379, db: 2, tls: false, ... }
 * ```
 * @category Queue
 */
export function parseQueueUrl(url: string): QueueUrl {
  let parsed: URL
  try {
    if (!url.includes('://')) throw new Error('no scheme')
    parsed = new URL(url)
  } catch {
    throw new QueueUrlError(url, `is not a Redis URL: ${EXPECTED}`)
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') {
    throw new QueueUrlError(url, `has the scheme '${parsed.protocol.replace(/:$/, '')}': ${EXPECTED}`)
  }
  const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1')
  if (host === '') throw new QueueUrlError(url, `names no host: ${EXPECTED}`)
  const port = parsed.port === '' ? 6379 : Number(parsed.port)
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new QueueUrlError(url, `has a bad port: ${EXPECTED}`)
  const path = parsed.pathname.replace(/^\//, '')
  if (path !== '' && !/^\d{1,5}$/.test(path)) {
    throw new QueueUrlError(url, `has the path '/${path}', not a database index: ${EXPECTED}`)
  }
  if (parsed.search !== '' || parsed.hash !== '') {
    throw new QueueUrlError(url, `has a query or fragment: ${EXPECTED}`)
  }
  const username = decodeURIComponent(parsed.username)
  const password = decodeURIComponent(parsed.password)
  const display = password === '' ? url : url.replace(`:${parsed.password}@`, ':***@')
  return {
    url,
    display,
    host,
    port,
    db: path === '' ? 0 : Number(path),
    ...(username === '' ? {} : { username }),
    ...(password === '' ? {} : { password }),
    tls: parsed.protocol === 'rediss:',
  }
}

/** ioredis options for a URL. */
function redisOptions(queue: QueueUrl): {
  host: string
  port: number
  db: number
  username?: string
  password?: string
  tls?: { servername: string }
} {
  return {
    host: queue.host,
    port: queue.port,
    db: queue.db,
    ...(queue.username === undefined ? {} : { username: queue.username }),
    ...(queue.password === undefined ? {} : { password: queue.password }),
    ...(queue.tls ? { tls: { servername: queue.host } } : {}),
  }
}

/** How long the first connection may take before Redis counts as unreachable (ms). */
const CONNECT_TIMEOUT_MS = 5000

/**
 * Connects once to the queue's Redis and checks that it answers (`PING`), accepts the
 * credentials and database, and is at least Redis 6.2 (what BullMQ needs); then disconnects.
 * Run before any work so that a wrong host or port gives one clear error instead of a client
 * that retries forever.
 *
 * @param queue - a parsed URL ({@link parseQueueUrl})
 * @returns the Redis server's version
 * @throws {@link QueueConnectionError} naming the URL and what failed
 * @category Queue
 */
export async function checkQueueConnection(queue: QueueUrl): Promise<string> {
  const client = new Redis({
    ...redisOptions(queue),
    lazyConnect: true,
    connectTimeout: CONNECT_TIMEOUT_MS,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  })
  let lastError: Error | undefined
  client.on('error', (error: Error) => {
    lastError = error
  })
  try {
    await client.connect()
    await client.ping()
    const info = await client.info('server')
    const version = /redis_version:(\S+)/.exec(info)?.[1] ?? '0'
    const [major = 0, minor = 0] = version.split('.').map(Number)
    if (major < 6 || (major === 6 && minor < 2)) {
      throw new QueueConnectionError(queue.display, `Redis ${version} is too old (BullMQ needs 6.2 or newer)`)
    }
    return version
  } catch (error) {
    if (error instanceof QueueConnectionError) throw error
    throw new QueueConnectionError(queue.display, describeConnectionError(error, lastError), { cause: error })
  } finally {
    client.disconnect()
  }
}

/** What failed, in one phrase: the socket error's code and message, or Redis' reply. */
function describeConnectionError(error: unknown, socketError: Error | undefined): string {
  const cause = (socketError ?? error) as NodeJS.ErrnoException
  const message = cause instanceof Error ? cause.message : String(cause)
  if (cause.code === 'ECONNREFUSED') return `connection refused (${message}); is redis-server running there?`
  if (cause.code === 'ENOTFOUND' || cause.code === 'EAI_AGAIN') return `unknown host (${message})`
  if (/ETIMEDOUT|timed? ?out/i.test(`${cause.code ?? ''} ${message}`)) {
    return `no answer within ${CONNECT_TIMEOUT_MS / 1000} s (${message})`
  }
  return message
}

/**
 * A long-lived ioredis client for BullMQ: it reconnects by itself when Redis restarts (with a
 * back-off up to 2 s, forever) and queues commands meanwhile (`maxRetriesPerRequest: null`, as
 * BullMQ's workers need). Errors while Redis is away go to `onError` (never unhandled).
 *
 * @param queue - a parsed URL
 * @param name - the client name Redis shows (`CLIENT LIST`)
 * @param onError - called with each connection error
 * @returns the client (close it with `disconnect()` or `quit()`)
 * @category Queue
 */
export function queueClient(queue: QueueUrl, name: string, onError: (error: Error) => void = () => {}): Redis {
  const client = new Redis({
    ...redisOptions(queue),
    connectionName: name,
    maxRetriesPerRequest: null,
    retryStrategy: (times) => Math.min(100 * times, 2000),
  })
  client.on('error', onError)
  return client
}
