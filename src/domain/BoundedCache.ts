/**
 * A least-recently-used map with a fixed number of entries: what the signer memoises derivations in, and webhook
 * delivery the bodies it signed. A Map keeps insertion order, so re-inserting on a hit moves the entry to the end
 * and eviction drops the first one.
 */
export interface BoundedCache<V> {
  readonly get: (key: string) => V | undefined
  readonly set: (key: string, value: V) => void
}

export const makeBoundedCache = <V>(entriesMax: number): BoundedCache<V> => {
  const entries = new Map<string, V>()
  return {
    get: (key) => {
      const value = entries.get(key)
      if (value !== undefined) {
        entries.delete(key)
        entries.set(key, value)
      }
      return value
    },
    set: (key, value) => {
      entries.set(key, value)
      if (entries.size > entriesMax) {
        const oldest = entries.keys().next()
        if (oldest.done !== true) entries.delete(oldest.value)
      }
    }
  }
}
