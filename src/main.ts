/** Launches the service: every listener and worker lives in the app layer. */
import { NodeRuntime } from "@effect/platform-node"
import { Layer } from "effect"
import { AppLayer } from "./App.ts"

Layer.launch(AppLayer).pipe(NodeRuntime.runMain)
