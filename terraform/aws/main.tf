# The gateway as an AWS Lambda function (provided.al2023, bootstrap) behind a
# Function URL, with async results in S3 and continuations on SQS.
#
# The deployer needs to create, read, update and delete, in the account and
# region: the Lambda function with its concurrency, Function URL, permissions
# and SQS event source mapping; the S3 bucket <name>-results-* and its
# settings; the queues <name>-continuations[-dlq]; the SNS notification topics
# the profiles name (notification_topics); the log group
# /aws/lambda/<name>; and, on the role <name>-gateway only, iam:CreateRole,
# GetRole, DeleteRole, TagRole, PutRolePolicy, GetRolePolicy, DeleteRolePolicy,
# ListRolePolicies, ListAttachedRolePolicies, ListInstanceProfilesForRole and
# PassRole. The exact list: docs/deploy-aws.md.

locals {
  # AWS advises a visibility timeout of at least 6 times the timeout of the
  # function the queue feeds.
  queue_visibility_timeout_secs = coalesce(var.queue_visibility_timeout_secs, 6 * var.lambda_timeout)

  # Stored async data is deleted once its request has expired: whole days,
  # rounded up, at least one.
  result_retention_days = max(1, ceil(var.async_ttl_secs / 86400))

  # The execution limit: the function's timeout (a Function URL adds no cap).
  limit_ms = var.lambda_timeout * 1000

  log_group_name = "/aws/lambda/${var.name}"

  # The notification topics the profiles name (when user_profiles is JSON;
  # list them in notification_topics when it is file:<path>): SNS FIFO
  # topics. The module creates them, writes their ARNs in
  # NotificationTopicArns, and the function may only publish to them
  # (docs/async-api.md#notifications-on-aws: in the cloud Terraform creates every topic), so terraform
  # destroy removes them with the rest.
  profiles                 = try(jsondecode(var.user_profiles), [])
  profile_topics           = [for p in local.profiles : p["async-config"]["topic"] if try(p["async-config"]["topic"], "") != ""]
  notification_topic_names = distinct(concat(local.profile_topics, var.notification_topics))

  # Written by the module from its own resources.
  # Telemetry (docs/observability.md), written only when set: CloudWatch EMF metrics in
  # the log line by default (the module's choice, not the gateway's default), and
  # OpenTelemetry's own variables.
  otel_settings = { for k, v in {
    EmfNamespace                = var.emf_namespace
    OTEL_EXPORTER_OTLP_ENDPOINT = var.otel_exporter_otlp_endpoint
    OTEL_EXPORTER_OTLP_HEADERS  = var.otel_exporter_otlp_headers
    OTEL_SERVICE_NAME           = var.otel_exporter_otlp_endpoint == null ? null : var.name
  } : k => v if v != null }

  host_settings = merge(
    {
      AsyncStore = "s3://${aws_s3_bucket.results.bucket}"
      AsyncQueue = aws_sqs_queue.continuations.url
    },
    length(local.notification_topic_names) == 0 ? {} : {
      NotificationTopicArns = join(",", [for t in local.notification_topic_names : aws_sns_topic.notifications[t].arn])
    },
  )
}

# --- async results --------------------------------------------------------

resource "aws_s3_bucket" "results" {
  bucket        = var.bucket_name
  bucket_prefix = var.bucket_name == null ? "${lower(substr(replace(var.name, "_", "-"), 0, 28))}-results-" : null
  tags          = var.tags
}

resource "aws_s3_bucket_public_access_block" "results" {
  bucket                  = aws_s3_bucket.results.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "results" {
  bucket = aws_s3_bucket.results.id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "results" {
  bucket = aws_s3_bucket.results.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "results" {
  bucket = aws_s3_bucket.results.id

  rule {
    id     = "expire-async-results"
    status = "Enabled"

    filter {}

    expiration {
      days = local.result_retention_days
    }

    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }
}

# --- continuations ----------------------------------------------------------

resource "aws_sqs_queue" "dead_letters" {
  name                      = "${var.name}-continuations-dlq"
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = true
  tags                      = var.tags
}

# --- lifecycle notifications --------------------------------------------------

# One SNS FIFO topic per profile topic: the gateway publishes each request's
# notifications in its own message group (the request id), so every
# subscriber gets them in order, and with a deduplication id of id and
# status, so a notification sent twice within 5 minutes is delivered once
# ("Amazon SNS message grouping for FIFO topics"; Publish,
# MessageDeduplicationId: Amazon SNS API Reference). MessageGroup scope:
# deduplication within each group, which the ids already are, and the
# regional throughput limits rather than the topic's 3,000 messages per
# second (FifoThroughputScope). FIFO topics deliver to SQS queues only:
# subscribe a queue (terraform/examples/aws does), and fan out from it.
resource "aws_sns_topic" "notifications" {
  for_each                    = toset(local.notification_topic_names)
  name                        = each.value
  fifo_topic                  = true
  content_based_deduplication = false
  fifo_throughput_scope       = "MessageGroup"
  tags                        = var.tags
}

resource "aws_sqs_queue" "continuations" {
  name                       = "${var.name}-continuations"
  visibility_timeout_seconds = local.queue_visibility_timeout_secs
  # A continuation must outlive its request (AsyncTTLSecs), up to SQS's
  # 14-day maximum; never less than SQS's 4-day default.
  message_retention_seconds = max(345600, min(1209600, ceil(var.async_ttl_secs)))
  sqs_managed_sse_enabled   = true
  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.dead_letters.arn
    maxReceiveCount     = var.max_receive_count
  })
  tags = var.tags
}

resource "aws_sqs_queue_redrive_allow_policy" "dead_letters" {
  queue_url = aws_sqs_queue.dead_letters.id
  redrive_allow_policy = jsonencode({
    redrivePermission = "byQueue"
    sourceQueueArns   = [aws_sqs_queue.continuations.arn]
  })
}

resource "aws_lambda_event_source_mapping" "continuations" {
  event_source_arn        = aws_sqs_queue.continuations.arn
  function_name           = aws_lambda_function.gateway.arn
  batch_size              = var.batch_size
  function_response_types = ["ReportBatchItemFailures"]

  # MaximumConcurrency "Limits the number of concurrent instances that the
  # Amazon SQS event source can invoke", 2 to 1000 (Lambda API Reference,
  # ScalingConfig; Lambda Developer Guide, "Configuring maximum concurrency for
  # Amazon SQS event sources"): a burst of continuations cannot take the
  # account's whole concurrency, and requests on the Function URL keep the
  # rest.
  scaling_config {
    maximum_concurrency = var.continuation_max_concurrency
  }
}

# --- the function -----------------------------------------------------------

resource "aws_cloudwatch_log_group" "gateway" {
  name              = local.log_group_name
  retention_in_days = var.log_retention_days
  tags              = var.tags
}

data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

# Least privilege: named actions only, each on this module's resources.
data "aws_iam_policy_document" "gateway" {
  statement {
    sid       = "Logs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.gateway.arn}:*"]
  }

  # PutObject also covers CreateMultipartUpload, UploadPart and
  # CompleteMultipartUpload; AbortMultipartUpload is its own action, which
  # infra/aws/store.go calls when a large upload fails ("To abort a multipart
  # upload you must have the s3:AbortMultipartUpload permission": Amazon S3 API
  # Reference, AbortMultipartUpload, and the S3 User Guide's "Multipart upload
  # API and permissions" table). No s3:DeleteObject: the gateway deletes no
  # object (stored results expire by the bucket's lifecycle rule;
  # TestLambdaRolePermissions refuses a grant no call needs).
  statement {
    sid       = "ResultObjects"
    actions   = ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"]
    resources = ["${aws_s3_bucket.results.arn}/*"]
  }

  # ListBucket lets a missing object answer 404 rather than 403.
  statement {
    sid       = "ResultBucket"
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.results.arn]
  }

  statement {
    sid = "Continuations"
    actions = [
      "sqs:SendMessage",
      "sqs:ReceiveMessage",
      "sqs:DeleteMessage",
      "sqs:GetQueueAttributes",
      "sqs:ChangeMessageVisibility",
    ]
    resources = [aws_sqs_queue.continuations.arn]
  }

  # The settings document only (warm_settings.tf): read, never written.
  dynamic "statement" {
    for_each = local.warm_s3 ? [1] : []
    content {
      sid       = "SettingsObject"
      actions   = ["s3:GetObject"]
      resources = ["${aws_s3_bucket.settings[0].arn}/${local.settings_object_key}"]
    }
  }

  # The AppConfig Agent Lambda extension reads the configuration with the
  # function's role ("AWS AppConfig Agent Lambda extension", AWS AppConfig
  # User Guide: the two AppConfig Data actions, on the configuration).
  dynamic "statement" {
    for_each = local.warm_appconfig ? [1] : []
    content {
      sid       = "AppConfig"
      actions   = ["appconfig:StartConfigurationSession", "appconfig:GetLatestConfiguration"]
      resources = ["${aws_appconfig_environment.settings[0].arn}/configuration/${aws_appconfig_configuration_profile.settings[0].configuration_profile_id}"]
    }
  }

  # Publish only, to the topics this module creates: no sns:CreateTopic
  # (the gateway has their ARNs from NotificationTopicArns).
  dynamic "statement" {
    for_each = length(local.notification_topic_names) == 0 ? [] : [1]
    content {
      sid       = "Notifications"
      actions   = ["sns:Publish"]
      resources = [for t in local.notification_topic_names : aws_sns_topic.notifications[t].arn]
    }
  }
}

resource "aws_iam_role" "gateway" {
  name               = "${var.name}-gateway"
  assume_role_policy = data.aws_iam_policy_document.assume.json
  tags               = var.tags
}

resource "aws_iam_role_policy" "gateway" {
  name   = "gateway"
  role   = aws_iam_role.gateway.id
  policy = data.aws_iam_policy_document.gateway.json
}

resource "aws_lambda_function" "gateway" {
  function_name    = var.name
  role             = aws_iam_role.gateway.arn
  runtime          = "provided.al2023"
  handler          = "bootstrap"
  architectures    = [var.architecture]
  filename         = var.package_path
  source_code_hash = filebase64sha256(var.package_path)
  timeout          = var.lambda_timeout
  memory_size      = var.memory_size
  # -1: unreserved (the provider's own default). Reserved concurrency "sets
  # both the maximum and minimum number of concurrent instances allocated to
  # your function", and "You can reserve up to the Unreserved account
  # concurrency value that is shown, minus 100 for functions that don't have
  # reserved concurrency" (Lambda Developer Guide, "Configuring reserved
  # concurrency for a function"): a default would fail on accounts with a low
  # quota, so none is reserved unless asked.
  reserved_concurrent_executions = coalesce(var.reserved_concurrent_executions, -1)

  # The AppConfig Agent Lambda extension, with warm_settings_source = appconfig.
  layers = local.warm_appconfig ? [var.appconfig_extension_layer_arn] : null

  environment {
    variables = local.app_settings
  }

  logging_config {
    log_format = "Text"
    log_group  = aws_cloudwatch_log_group.gateway.name
  }

  tags = var.tags

  depends_on = [aws_iam_role_policy.gateway]

  lifecycle {
    precondition {
      condition     = var.function_limit_margin_ms < local.limit_ms
      error_message = "function_limit_margin_ms must be less than lambda_timeout (in ms)."
    }
    precondition {
      condition     = var.timeout == tonumber(local.gateway_defaults.Timeout) || var.timeout <= local.limit_ms - var.function_limit_margin_ms
      error_message = "timeout must fit one invocation: at most lambda_timeout less function_limit_margin_ms, in ms."
    }
    precondition {
      condition     = alltrue([for r in coalesce(var.routes, []) : r.timeoutMs == null || coalesce(r.timeoutMs, 0) <= local.limit_ms - var.function_limit_margin_ms])
      error_message = "Every route's timeoutMs must fit one invocation: at most lambda_timeout less function_limit_margin_ms."
    }
    precondition {
      condition     = !var.async_mode_enabled || var.async_trigger_timeout == tonumber(local.gateway_defaults.AsyncTriggerTimeout) || var.async_trigger_timeout <= local.limit_ms - var.function_limit_margin_ms
      error_message = "async_trigger_timeout must let the 202 go out inside one invocation: at most lambda_timeout less function_limit_margin_ms."
    }
    precondition {
      condition     = alltrue([for t in local.profile_topics : can(regex("^[A-Za-z0-9_-]{1,251}[.]fifo$", t))])
      error_message = "Every async-config.topic of user_profiles must be an SNS FIFO topic name (1-256 letters, digits, hyphens and underscores, ending in .fifo): the module creates a FIFO topic of that name."
    }
    precondition {
      condition     = var.reserved_concurrent_executions == null || var.continuation_max_concurrency <= coalesce(var.reserved_concurrent_executions, 0)
      error_message = "continuation_max_concurrency must not exceed reserved_concurrent_executions: the queue's invocations beyond the function's own ceiling would only be throttled."
    }
    precondition {
      condition     = var.function_timeout_secs == null || coalesce(var.function_timeout_secs, 0) <= var.lambda_timeout
      error_message = "function_timeout_secs must not exceed lambda_timeout, the host's own limit."
    }
    # The gateway holds the body budgets against its soft memory limit, 80 %
    # of AWS_LAMBDA_FUNCTION_MEMORY_SIZE (functions/gc.go, gcLimitShare):
    # refused here rather than at the first invocation. A max_buffered_bytes
    # left at its default is lowered by the gateway to fit (a 128 MB function).
    precondition {
      condition     = var.max_buffered_bytes == tonumber(local.gateway_defaults.MaxBufferedBytes) || var.max_buffered_bytes <= floor(var.memory_size * 1048576 * 0.8)
      error_message = "max_buffered_bytes must fit under the gateway's soft memory limit: at most 80 % of memory_size, in bytes."
    }
    precondition {
      condition     = var.max_retry_body_bytes <= floor(var.memory_size * 1048576 * 0.8)
      error_message = "max_retry_body_bytes must fit under the gateway's soft memory limit: at most 80 % of memory_size, in bytes."
    }
  }
}

resource "aws_lambda_function_url" "gateway" {
  function_name      = aws_lambda_function.gateway.function_name
  authorization_type = var.function_url_auth_type
  invoke_mode        = var.invoke_mode
}

# A public URL (auth type NONE) needs both statements since October 2025:
# InvokeFunctionUrl for the URL and InvokeFunction through it. Recent providers
# add them untracked when the URL is created; these are tracked in the state
# (own statement ids, so they never collide). With AWS_IAM, the callers' own
# policies grant the same two actions.
resource "aws_lambda_permission" "url_public" {
  count                  = var.function_url_auth_type == "NONE" ? 1 : 0
  statement_id           = "GatewayURLPublicAccess"
  action                 = "lambda:InvokeFunctionUrl"
  function_name          = aws_lambda_function.gateway.function_name
  principal              = "*"
  function_url_auth_type = "NONE"
}

resource "aws_lambda_permission" "url_invoke" {
  count                    = var.function_url_auth_type == "NONE" ? 1 : 0
  statement_id             = "GatewayURLInvokeViaURL"
  action                   = "lambda:InvokeFunction"
  function_name            = aws_lambda_function.gateway.function_name
  principal                = "*"
  invoked_via_function_url = true
}
