"""What every AZR HTTP service shares: the error bodies of the APIs (`errors`), `/healthz`, `/readyz`, Prometheus
`/metrics`, the request-body cap and the bearer-token guard (`ops`), the `/metrics` endpoint of the processes without
an HTTP app of their own (`metrics_endpoint`), and the liveness probes of the servers AZR depends on (`probes`)."""
