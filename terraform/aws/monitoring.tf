# --- monitoring: the dashboard, the alarms and their topic --------------------
#
# docs/operations.md describes every panel and alarm. The dashboard's body is
# generated from terraform/monitoring/panels.json (TestMonitoringGenerated);
# every gateway metric it and the alarms name is one the binary emits in its
# Embedded Metric Format line (TestMonitoringNamesEmitted).

data "aws_region" "current" {}

locals {
  # The gateway's panels read the EMF namespace; with emf_namespace = null the
  # binary writes no metrics and those panels stay empty.
  dashboard_namespace = coalesce(var.emf_namespace, "FnGateway")
  alarm_actions       = var.alarms.email == null ? [] : [aws_sns_topic.alarms[0].arn]
  s3_metrics_filter   = "EntireBucket"
}

resource "aws_cloudwatch_dashboard" "gateway" {
  dashboard_name = var.name
  dashboard_body = templatefile("${path.module}/dashboard.json.tftpl", {
    region              = data.aws_region.current.region
    namespace           = local.dashboard_namespace
    function_name       = aws_lambda_function.gateway.function_name
    continuations_queue = aws_sqs_queue.continuations.name
    dead_letter_queue   = aws_sqs_queue.dead_letters.name
    memory_mb           = var.memory_size
    results_bucket      = aws_s3_bucket.results.bucket
    s3_metrics_filter   = local.s3_metrics_filter
  })
}

# S3's request metrics (AllRequests, by bucket and filter) exist only for a
# bucket with a metrics configuration, and are billed as CloudWatch custom
# metrics ("Monitoring metrics with Amazon CloudWatch", Amazon S3 User Guide):
# the cost panel's S3 requests per async request.
resource "aws_s3_bucket_metric" "results" {
  count  = var.s3_request_metrics ? 1 : 0
  bucket = aws_s3_bucket.results.id
  name   = local.s3_metrics_filter
}

resource "aws_sns_topic" "alarms" {
  count = var.alarms.email == null ? 0 : 1
  name  = "${var.name}-alarms"
  tags  = var.tags
}

# SNS sends a confirmation message; nothing is delivered until the address
# confirms ("Subscribing an endpoint to an Amazon SNS topic").
resource "aws_sns_topic_subscription" "alarm_email" {
  count     = var.alarms.email == null ? 0 : 1
  topic_arn = aws_sns_topic.alarms[0].arn
  protocol  = "email"
  endpoint  = var.alarms.email
}

locals {
  # A continuation that waited a quarter of its request's life has lost a
  # quarter of its time to finish; 900 s at most.
  continuation_age_secs = coalesce(var.alarms.continuation_age_secs, min(900, ceil(var.async_ttl_secs / 4)))
  # A p99 past half the request TTL: most requests still answer, but the
  # slowest spend most of their budget, a step from 504 TTLExpired.
  latency_p99_ms = coalesce(var.alarms.latency_p99_ms, var.default_ttl_secs * 500)

  # The alarms (docs/operations.md#alarms-and-alerts-what-each-means-what-to-do), each over 5-minute periods. A
  # condition that comes and goes (a count of events, a rate, a latency)
  # alarms when it held in 3 of the last 5 periods, so one bad request in
  # one period pages nobody and a failure of 15 minutes in 25 does; a level
  # that stays until someone acts (a dead letter waiting, the oldest
  # continuation's age) alarms in the first period it is over.
  #
  # metric_alarms: one metric each, its statistic (pNN: a percentile) and
  # threshold; dimensions null: the metric's dimensionless series.
  metric_alarms = {
    # Continuations SQS gave up on: maxReceiveCount receives without success.
    dead-letters = {
      description = "Continuations in the dead-letter queue (docs/operations.md#dead-letters-visible)."
      namespace   = "AWS/SQS"
      metric_name = "ApproximateNumberOfMessagesVisible"
      dimensions  = { QueueName = aws_sqs_queue.dead_letters.name }
      statistic   = "Maximum"
      threshold   = var.alarms.dead_letters
      periods     = 1
    }
    # The oldest continuation waiting: the queue is not being drained.
    continuation-age = {
      description = "The oldest continuation has waited longer than alarms.continuation_age_secs (docs/operations.md#oldest-continuation)."
      namespace   = "AWS/SQS"
      metric_name = "ApproximateAgeOfOldestMessage"
      dimensions  = { QueueName = aws_sqs_queue.continuations.name }
      statistic   = "Maximum"
      threshold   = local.continuation_age_secs
      periods     = 1
    }
    # Requests the function's own execution limit ended (504 FunctionLimit):
    # from the EMF line, so only with emf_namespace set (below).
    function-limit = {
      description = "Requests ended by the function's execution limit, 504 FunctionLimit, in 3 of 5 periods (docs/operations.md#functionlimit-endings)."
      namespace   = var.emf_namespace
      metric_name = "end_function_limit"
      dimensions  = null
      statistic   = "Sum"
      threshold   = var.alarms.function_limit_endings
      periods     = 3
    }
    # The gateway's p99 latency, arrival to the end of the answer.
    latency-p99 = {
      description = "The gateway's p99 request duration above alarms.latency_p99_ms in 3 of 5 periods (docs/operations.md#p99-latency)."
      namespace   = var.emf_namespace
      metric_name = "durationMs"
      dimensions  = null
      statistic   = "p99"
      threshold   = local.latency_p99_ms
      periods     = 3
    }
    # Invocations that failed in the function itself (a crash, a runtime
    # error), not backend failures, which the gateway answers.
    function-errors = {
      description = "Invocations the function itself failed, in 3 of 5 periods (docs/operations.md#function-errors)."
      namespace   = "AWS/Lambda"
      metric_name = "Errors"
      dimensions  = { FunctionName = aws_lambda_function.gateway.function_name }
      statistic   = "Sum"
      threshold   = var.alarms.function_errors
      periods     = 3
    }
    # Invocations Lambda refused for want of concurrency.
    throttles = {
      description = "Invocations refused for want of concurrency, in 3 of 5 periods (docs/operations.md#throttles)."
      namespace   = "AWS/Lambda"
      metric_name = "Throttles"
      dimensions  = { FunctionName = aws_lambda_function.gateway.function_name }
      statistic   = "Sum"
      threshold   = var.alarms.throttles
      periods     = 3
    }
  }

  # rate_alarms: the percentage of requests (denominator, a sum of EMF
  # metrics) that ended one way (numerator), in periods with at least
  # alarms.rate_min_requests of them (fewer: 0, no alarm), over the whole
  # gateway and again for each route of var.routes (the EMF route
  # dimension: the alarm names the route). Only with emf_namespace set.
  rate_alarms = {
    error-rate = {
      description = "More than alarms.error_rate_percent of requests answered 5xx, the backend's or the gateway's, in 3 of 5 periods (docs/operations.md#5xx-rate)."
      numerator   = ["status_5xx"]
      denominator = ["requests"]
      threshold   = var.alarms.error_rate_percent
    }
    deadline-rate = {
      description = "More than alarms.deadline_rate_percent of requests ended 504 TTLExpired or AttemptTimeout in 3 of 5 periods (docs/operations.md#deadline-rate)."
      numerator   = ["end_ttl_expired", "end_attempt_timeout"]
      denominator = ["requests"]
      threshold   = var.alarms.deadline_rate_percent
    }
    backend-unavailable-rate = {
      description = "More than alarms.backend_unavailable_rate_percent of requests ended 502 BackendUnavailable in 3 of 5 periods (docs/operations.md#backendunavailable-rate)."
      numerator   = ["end_backend_unavailable"]
      denominator = ["requests"]
      threshold   = var.alarms.backend_unavailable_rate_percent
    }
    async-unavailable = {
      description = "More than alarms.async_unavailable_percent of async hand-offs refused 503 AsyncUnavailable (the async store or queue is down) in 3 of 5 periods (docs/operations.md#async-store-unavailable)."
      numerator   = ["async_unavailable"]
      denominator = ["async_accepted", "async_unavailable"]
      threshold   = var.alarms.async_unavailable_percent
    }
  }
}

resource "aws_cloudwatch_metric_alarm" "gateway" {
  for_each            = { for k, a in local.metric_alarms : k => a if a.namespace != null }
  alarm_name          = "${var.name}-${each.key}"
  alarm_description   = each.value.description
  namespace           = each.value.namespace
  metric_name         = each.value.metric_name
  dimensions          = each.value.dimensions
  statistic           = startswith(each.value.statistic, "p") ? null : each.value.statistic
  extended_statistic  = startswith(each.value.statistic, "p") ? each.value.statistic : null
  period              = 300
  evaluation_periods  = each.value.periods == 1 ? 1 : 5
  datapoints_to_alarm = each.value.periods
  comparison_operator = "GreaterThanThreshold"
  threshold           = each.value.threshold
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}

# A rate as CloudWatch metric math ("Using math expressions with CloudWatch
# metrics": IF, arithmetic over the ids of the other queries), the one
# query that returns data.
locals {
  # Each rate alarm over the whole gateway (route null), and per route as
  # "<alarm> <prefix>".
  rate_alarm_instances = merge(
    { for k, a in local.rate_alarms : k => merge(a, { route = null }) },
    merge([for k, a in local.rate_alarms : { for r in coalesce(var.routes, []) : "${k} ${r.prefix}" => merge(a, { route = r.prefix }) }]...),
  )
}

resource "aws_cloudwatch_metric_alarm" "rate" {
  for_each            = var.emf_namespace == null ? {} : local.rate_alarm_instances
  alarm_name          = "${var.name}-${each.key}"
  alarm_description   = each.value.route == null ? each.value.description : "Route ${each.value.route}: ${each.value.description}"
  evaluation_periods  = 5
  datapoints_to_alarm = 3
  comparison_operator = "GreaterThanThreshold"
  threshold           = each.value.threshold
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags

  metric_query {
    id          = "rate"
    expression  = "IF((${join(" + ", [for i, _ in each.value.denominator : "d${i}"])}) >= ${var.alarms.rate_min_requests}, 100 * (${join(" + ", [for i, _ in each.value.numerator : "n${i}"])}) / (${join(" + ", [for i, _ in each.value.denominator : "d${i}"])}), 0)"
    label       = "${each.key} (%)"
    return_data = true
  }

  dynamic "metric_query" {
    for_each = merge({ for i, m in each.value.numerator : "n${i}" => m }, { for i, m in each.value.denominator : "d${i}" => m })
    content {
      id          = metric_query.key
      return_data = false
      metric {
        namespace   = var.emf_namespace
        metric_name = metric_query.value
        dimensions  = each.value.route == null ? null : { route = each.value.route }
        period      = 300
        stat        = "Sum"
      }
    }
  }
}
