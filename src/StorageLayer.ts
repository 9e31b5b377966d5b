/**
 * Configuration and storage, the part of the service main.ts starts before it loads the rest (App.ts): the embedded
 * PostgreSQL recovers on its own core while the modules load (Database.StorageUnderway).
 */
import { Layer } from "effect"
import { AppConfig } from "./Config.ts"
import * as Database from "./db/Database.ts"

export const StorageLayer = Database.layer.pipe(Layer.provideMerge(AppConfig.layerConfig))
