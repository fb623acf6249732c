// Types for parse-prometheus-text-format (the package ships none): its output follows prom2json.
declare module 'parse-prometheus-text-format' {
  export interface PrometheusSample {
    labels?: Record<string, string>
    /** Counters, gauges and untyped samples. */
    value?: string
    /** Histograms: cumulative counts by upper bound (`le`). */
    buckets?: Record<string, string>
    /** Summaries. */
    quantiles?: Record<string, string>
    count?: string
    sum?: string
  }
  export interface PrometheusFamily {
    name: string
    help: string
    type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED'
    metrics: PrometheusSample[]
  }
  export default function parsePrometheusTextFormat(text: string): PrometheusFamily[]
}
