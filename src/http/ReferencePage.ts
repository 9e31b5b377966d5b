/**
 * `GET /docs`: the interactive API reference (Scalar) rendered from the OpenAPI document, without authentication.
 * Effect's `HttpApiScalar.layer` imports Scalar's 3 MB bundle while the layer is built, 0.15 s of a restart's
 * readiness promise (README); this route imports it at the first request instead and keeps the page. The HTML is
 * HttpApiScalar's (effect 4.1), the bundle inline as there: the page works without reaching a CDN.
 */
import { Effect } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { type HttpApi, type HttpApiGroup, OpenApi } from "effect/http-api"

/** JSON inside a <script>: no `</script>` and no line terminators JavaScript would choke on. */
const scriptJson = (value: unknown) =>
  JSON.stringify(value).replace(/</g, "\\u003c").replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029")

const escapeHtml = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")

const render = <Id extends string, Groups extends HttpApiGroup.Constraint>(api: HttpApi.HttpApi<Id, Groups>, scalar: string) => {
  const spec = OpenApi.fromApi(api)
  return `<!doctype html>
<html>
  <head>
    <meta charset="utf-8" />
    <title>${escapeHtml(spec.info.title)}</title>
    <meta name="viewport" content="width=device-width, initial-scale=1" />
  </head>
  <body>
    <div id="api-reference-container"></div>
    <script>${scalar}</script>
    <script>
      window.Scalar.createApiReference(document.getElementById('api-reference-container'), {
        ...${scriptJson({ _integration: "html" })},
        content: ${scriptJson(spec)}
      })
    </script>
  </body>
</html>`
}

/**
 * The bundle HttpApiScalar.layer imports. The package's exports map closes `internal/`, so it is found beside the
 * public module; an effect upgrade that moves it fails the reference page's test (Framework.test.ts), not the start.
 */
const scalarBundle = () => new URL("./internal/httpApiScalar.js", import.meta.resolve("effect/http-api")).href

export const referencePage = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>,
  path: HttpRouter.PathInput = "/docs"
) => {
  let page: Promise<string> | undefined
  const load = () =>
    page ??= (import(scalarBundle()) as Promise<{ readonly javascript: string }>).then(({ javascript }) =>
      render(api, javascript)
    )
  return HttpRouter.add("GET", path, Effect.promise(load).pipe(Effect.map((html) => HttpServerResponse.html(html))))
}
