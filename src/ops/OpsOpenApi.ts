/** What the operator interface's OpenAPI document (GET /ops/openapi.json) says beyond what its definitions derive. */
import { allowAdditionalProperties } from "../api/Api.ts"

/**
 * Every operation takes the operator's bearer token (operator-interface.md, "Transport and authentication"); the
 * OpsAuth middleware checks it by hand, so the document is told here. Like /v1's, the document does not claim
 * `additionalProperties: false`: unknown request fields are ignored.
 */
export const addOpsTokenSecurity = (spec: Record<string, any>): Record<string, any> => {
  allowAdditionalProperties(spec)
  spec.components = spec.components ?? {}
  spec.components.securitySchemes = {
    ...spec.components.securitySchemes,
    opsToken: {
      type: "http",
      scheme: "bearer",
      description: "the operator token: OPS_TOKEN, or the one generated into DATA_DIR/ops-token"
    }
  }
  spec.security = [{ opsToken: [] }]
  return spec
}
