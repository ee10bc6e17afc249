/**
 * A user script that fails after choosing the wasm backend, run by backend.test.ts in a child
 * process: `throw` throws from a timer (an uncaught exception), `reject` leaves a rejected
 * promise unhandled, `top` throws at the module's top level.
 */
import { useBackend } from '../backend.ts'

await useBackend('wasm')
const how = process.argv[2] ?? 'top'
if (how === 'throw') {
  setTimeout(() => {
    throw new Error('the user script failed (throw)')
  }, 0)
} else if (how === 'reject') {
  void Promise.reject(new Error('the user script failed (reject)'))
} else {
  throw new Error('the user script failed (top)')
}
