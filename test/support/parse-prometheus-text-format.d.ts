/** Types of the parse-prometheus-text-format package (it ships none): the prom2json-like shape it returns. */
declare module "parse-prometheus-text-format" {
  export interface ParsedSample {
    readonly value?: string
    readonly labels?: Record<string, string>
    readonly buckets?: Record<string, string>
    readonly count?: string
    readonly sum?: string
  }
  export interface ParsedFamily {
    readonly name: string
    readonly help: string
    readonly type: "COUNTER" | "GAUGE" | "HISTOGRAM" | "SUMMARY" | "UNTYPED"
    readonly metrics: ReadonlyArray<ParsedSample>
  }
  const parsePrometheusTextFormat: (text: string) => ReadonlyArray<ParsedFamily>
  export default parsePrometheusTextFormat
}
