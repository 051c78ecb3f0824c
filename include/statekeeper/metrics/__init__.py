"""The runs' figures as Prometheus metrics: what each DAG pushes to a Pushgateway (and through OpenTelemetry).

    statekeeper.metrics.names     every metric: name, type, labels, help, source table and column (the registry)
    statekeeper.metrics.settings  the job label and the alert thresholds a run pushes beside its figures
    statekeeper.metrics.figures   pure: rows of the tables -> samples, folded one data file at a time
    statekeeper.metrics.gather    reads a warehouse's tables (statekeeper.tables.reader) into the folds
    statekeeper.metrics.push      the edge: samples -> a Pushgateway (prometheus-client), grouped by DAG and warehouse
    statekeeper.metrics.otel      the edge: the same samples through the OpenTelemetry metrics API

`python -m statekeeper.metrics --warehouse W` prints what a run would push. docs/metrics.md documents every
metric; monitoring/statekeeper.rules.yml holds the alerting rules built on them.
"""
