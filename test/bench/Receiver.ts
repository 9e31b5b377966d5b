/**
 * The webhook receiver of the deliveries phase, in a process of its own so neither the service nor the benchmark's
 * load client shares its event loop: answers every POST 200 with a short body once the request body has arrived,
 * except under `/slow/`, which answers after 5 s. Prints its port as its first line of output.
 */
import http from "node:http"

const slowAnswerMs = 5_000
const answer = Buffer.from("ok")

const server = http.createServer({ keepAliveTimeout: 30_000 }, (request, response) => {
  request.on("data", () => undefined)
  request.on("end", () => {
    const send = () => {
      response.writeHead(200, { "content-type": "text/plain", "content-length": answer.byteLength })
      response.end(answer)
    }
    if (request.url?.startsWith("/slow/") === true) setTimeout(send, slowAnswerMs)
    else send()
  })
})
server.listen(0, "127.0.0.1", () => {
  const address = server.address()
  process.stdout.write(`${typeof address === "object" && address !== null ? address.port : 0}\n`)
})
process.on("SIGTERM", () => process.exit(0))
