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

  # One alarm per condition, each over 5 minutes: what it watches and its
  # threshold (docs/operations.md#alarms-and-alerts-what-each-means-what-to-do). dimensions null: the metric's
  # dimensionless series.
  metric_alarms = {
    # Continuations SQS gave up on: maxReceiveCount receives without success.
    dead-letters = {
      description = "Continuations in the dead-letter queue (docs/operations.md#dead-letters-visible)."
      namespace   = "AWS/SQS"
      metric_name = "ApproximateNumberOfMessagesVisible"
      dimensions  = { QueueName = aws_sqs_queue.dead_letters.name }
      statistic   = "Maximum"
      threshold   = var.alarms.dead_letters
    }
    # The oldest continuation waiting: the queue is not being drained.
    continuation-age = {
      description = "The oldest continuation has waited longer than alarms.continuation_age_secs (docs/operations.md#oldest-continuation)."
      namespace   = "AWS/SQS"
      metric_name = "ApproximateAgeOfOldestMessage"
      dimensions  = { QueueName = aws_sqs_queue.continuations.name }
      statistic   = "Maximum"
      threshold   = local.continuation_age_secs
    }
    # Requests the function's own execution limit ended (504 FunctionLimit):
    # from the EMF line, so only with emf_namespace set (below).
    function-limit = {
      description = "Requests ended by the function's execution limit, 504 FunctionLimit (docs/operations.md#functionlimit-endings)."
      namespace   = var.emf_namespace
      metric_name = "end_function_limit"
      dimensions  = null
      statistic   = "Sum"
      threshold   = var.alarms.function_limit_endings
    }
    # Invocations that failed in the function itself (a crash, a runtime
    # error), not backend failures, which the gateway answers.
    function-errors = {
      description = "Invocations the function itself failed (docs/operations.md#function-errors)."
      namespace   = "AWS/Lambda"
      metric_name = "Errors"
      dimensions  = { FunctionName = aws_lambda_function.gateway.function_name }
      statistic   = "Sum"
      threshold   = var.alarms.function_errors
    }
    # Invocations Lambda refused for want of concurrency.
    throttles = {
      description = "Invocations refused for want of concurrency (docs/operations.md#throttles)."
      namespace   = "AWS/Lambda"
      metric_name = "Throttles"
      dimensions  = { FunctionName = aws_lambda_function.gateway.function_name }
      statistic   = "Sum"
      threshold   = var.alarms.throttles
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
  statistic           = each.value.statistic
  period              = 300
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = each.value.threshold
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = var.tags
}
