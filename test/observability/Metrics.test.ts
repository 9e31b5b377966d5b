/**
 * GET /metrics (issue 32, "Metrics, traces, logs"; docs/operations.md "Metrics"): behind the operator token, in the
 * Prometheus text format 0.0.4 as a real parser reads it, with the request metrics by route template, the database
 * gauges computed at the scrape, the counters that alerts need from 0, and effect/cluster's own metrics.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import parsePrometheusTextFormat, { type ParsedFamily } from "parse-prometheus-text-format"
import { OpsAddress } from "../../src/App.ts"
import { makeTestAppLayer, opsRequest, provisionTenant, rawRequest, type TestTenant } from "../support/TestApp.ts"

/** The last scrape's text, for what the parser leaves out (of a histogram it keeps one series' buckets, without labels, sum or count). */
let lastText = ""

const scrape = Effect.gen(function*() {
  const response = yield* opsRequest("GET", "/metrics")
  lastText = response.text
  assert.strictEqual(response.status, 200, response.text)
  assert.strictEqual(response.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8")
  const families = parsePrometheusTextFormat(response.text)
  return new Map(families.map((family) => [family.name, family]))
})

const family = (families: ReadonlyMap<string, ParsedFamily>, name: string, type: ParsedFamily["type"]) => {
  const found = families.get(name)
  assert.isDefined(found, `${name} is exported`)
  assert.strictEqual(found!.type, type, `${name} is a ${type}`)
  return found!
}

const sample = (found: ParsedFamily, labels: Record<string, string>) =>
  found.metrics.find((metric) => Object.entries(labels).every(([key, value]) => metric.labels?.[key] === value))

const signedGet = (tenant: TestTenant, target: string) =>
  rawRequest({ baseUrl: tenant.baseUrl, method: "GET", target, tenant })

layer(makeTestAppLayer(), { excludeTestServices: true })("GET /metrics", (it) => {
  it.effect("without the operator token it is 401, like every operator route", () =>
    Effect.gen(function*() {
      const baseUrl = yield* OpsAddress
      const response = yield* rawRequest({ baseUrl, method: "GET", target: "/metrics" })
      assert.strictEqual(response.status, 401, response.text)
      assert.strictEqual(response.json.error.code, "UNAUTHORIZED")
    }))

  it.effect("requests are counted by route template, method and status, with a duration histogram", () =>
    Effect.gen(function*() {
      const tenant = yield* provisionTenant()
      for (let i = 0; i < 3; i++) assert.strictEqual((yield* signedGet(tenant, "/v1/networks")).status, 200)
      // An unknown wallet id: its route template, not the path, labels it.
      const missing = yield* signedGet(tenant, "/v1/wallets/00000000-0000-7000-8000-000000000000")
      assert.strictEqual(missing.status, 404, missing.text)
      // No route at all: `unmatched`, whatever the path.
      assert.strictEqual((yield* rawRequest({ baseUrl: tenant.baseUrl, method: "GET", target: "/no/such/path" })).status, 404)
      // Refused by authentication: counted by reason.
      const unsigned = yield* rawRequest({ baseUrl: tenant.baseUrl, method: "GET", target: "/v1/networks" })
      assert.strictEqual(unsigned.status, 401, unsigned.text)

      const families = yield* scrape
      const requests = family(families, "coffer_http_requests_total", "COUNTER")
      const networks = sample(requests, { route: "/v1/networks", method: "GET", status: "200" })
      assert.isDefined(networks, JSON.stringify(requests.metrics))
      assert.isAtLeast(Number(networks!.value), 3)
      assert.isDefined(sample(requests, { route: "/v1/wallets/:id", method: "GET", status: "404" }), JSON.stringify(requests.metrics))
      assert.isDefined(sample(requests, { route: "unmatched", method: "GET", status: "404" }))
      assert.isDefined(sample(requests, { route: "/v1/networks", method: "GET", status: "401" }))
      assert.isUndefined(requests.metrics.find((metric) => metric.labels?.route?.includes("00000000")), "no raw path")
      // The operator's own requests, on the other listener, too.
      assert.isDefined(sample(requests, { route: "/ops/tenants", method: "POST", status: "201" }))

      const durations = family(families, "coffer_http_request_duration_seconds", "HISTOGRAM")
      assert.isDefined(durations.metrics[0]?.buckets?.["+Inf"])
      const series = `route="/v1/networks",method="GET",status="200"`
      const infinity = lastText.match(new RegExp(`^coffer_http_request_duration_seconds_bucket\\{${series},le="\\+Inf"\\} (\\d+)$`, "m"))
      const count = lastText.match(new RegExp(`^coffer_http_request_duration_seconds_count\\{${series}\\} (\\d+)$`, "m"))
      assert.isNotNull(infinity, lastText)
      assert.isAtLeast(Number(infinity![1]), 3)
      assert.strictEqual(count?.[1], infinity![1], "the +Inf bucket holds every request")

      const failures = family(families, "coffer_auth_failures_total", "COUNTER")
      assert.isAtLeast(Number(sample(failures, { listener: "tenant", reason: "missing_credentials" })?.value), 1)
      // Present from 0, so increase() sees the first one.
      assert.strictEqual(sample(failures, { listener: "tenant", reason: "bad_signature" })?.value, "0")
    }))

  it.effect("the database gauges are read at the scrape: open withdrawals, outbox backlog and its age", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const before = yield* scrape
      const open = family(before, "coffer_withdrawals_open", "GAUGE")
      const queued = Number(sample(open, { network: "ETH_SEPOLIA", status: "QUEUED" })?.value)
      assert.isFalse(Number.isNaN(queued), "every catalog network and open status has a series")
      family(before, "coffer_withdrawals_oldest_open_seconds", "GAUGE")
      family(before, "coffer_chain_lag_blocks", "GAUGE")
      family(before, "coffer_chain_lag_seconds", "GAUGE")
      family(before, "coffer_webhook_deliveries_pending", "GAUGE")
      family(before, "coffer_webhook_endpoints_failing", "GAUGE")
      const deliveries = family(before, "coffer_webhook_deliveries_total", "COUNTER")
      assert.deepStrictEqual(deliveries.metrics.map((metric) => metric.labels?.outcome).sort(), ["dead", "delivered", "retry"])
      assert.strictEqual(sample(family(before, "coffer_metrics_database_up", "GAUGE"), {})?.value, "1")
      // This scrape's own statement was an active session.
      assert.isAtLeast(Number(sample(family(before, "coffer_db_connections", "GAUGE"), { state: "active" })?.value), 1)
      assert.strictEqual(sample(family(before, "coffer_db_pool_connections_max", "GAUGE"), {})?.value, "10")

      // An event an hour old that nobody fanned out: the backlog and its age, as the database holds them now.
      const tenant = yield* provisionTenant()
      yield* sql`
        INSERT INTO outbox_events (id, tenant_id, event_type, subject_id, dedupe_key, data, created_at)
        VALUES (gen_random_uuid(), ${tenant.tenantId}, 'WEBHOOK_TEST', 'metrics-test', 'metrics-test', '{}'::jsonb,
          now() - interval '1 hour')`
      const after = yield* scrape
      assert.isAtLeast(Number(sample(family(after, "coffer_outbox_undelivered", "GAUGE"), {})?.value), 1)
      assert.isAtLeast(Number(sample(family(after, "coffer_outbox_oldest_undelivered_seconds", "GAUGE"), {})?.value), 3500)
      yield* sql`DELETE FROM outbox_events WHERE subject_id = 'metrics-test'`
    }))

  it.effect("the process's pool: its size, the sessions in use and the checkouts waiting", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // The test shares the service's pool: a transaction of its own holds one session through the scrape.
      const families = yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`SELECT 1`
        return yield* scrape
      }))
      assert.strictEqual(sample(family(families, "coffer_db_pool_connections_max", "GAUGE"), {})?.value, "10")
      const inUse = Number(sample(family(families, "coffer_db_pool_connections_in_use", "GAUGE"), {})?.value)
      assert.isAtLeast(inUse, 1, "this test's transaction")
      assert.isAtMost(inUse, 10)
      const waiting = Number(sample(family(families, "coffer_db_pool_checkouts_waiting", "GAUGE"), {})?.value)
      assert.isAtLeast(waiting, 0)
      assert.isFalse(Number.isNaN(waiting))
    }))

  it.effect("effect/cluster's own metrics are exported beside the service's", () =>
    Effect.gen(function*() {
      const families = yield* scrape
      const cluster = [...families.keys()].filter((name) => name.startsWith("effect_cluster_"))
      assert.isAtLeast(cluster.length, 1, [...families.keys()].join(", "))
      assert.isDefined(families.get("effect_cluster_shards"), cluster.join(", "))
    }))
})
