# Deploys the gateway to AWS Lambda behind a Function URL. Build the zip
# first: make package-aws (dist/aws-lambda.zip: bootstrap built for the
# module's default architecture, arm64). Step by step: docs/deploy-aws.md.

provider "aws" {
  region = var.region
}

module "gateway" {
  source = "../../aws"

  name         = var.name
  package_path = "${path.root}/../../../dist/aws-lambda.zip"
  # architecture: the module's default (arm64), the one make package-aws
  # builds for; set both together (docs/deploy-aws.md).

  lambda_timeout         = 120
  function_url_auth_type = "AWS_IAM"
  invoke_mode            = "BUFFERED"

  hosts                 = var.hosts
  async_mode_enabled    = true
  async_trigger_timeout = var.async_trigger_timeout
  timeout               = 60000
  user_profiles = jsonencode([
    { userId = "batch", "async-config" = { enabled = true, topic = local.batch_topic } },
  ])

  # Who the alarms page (docs/operations.md#alarms-and-alerts-what-each-means-what-to-do); the thresholds are the
  # module's defaults.
  alarms = { email = var.alarm_email }

  # WARM settings, changed live: docs/deploy-aws.md#6-change-a-setting.
  warm_settings = var.warm_settings
}

# --- a subscriber of the batch profile's notifications ------------------------

# The module creates the SNS FIFO topic the profile names; this FIFO queue
# subscribes to it and gets each request's notifications in order (the
# gateway publishes them in one message group per request). Raw delivery:
# each message is the notification's JSON itself, not SNS's envelope.
locals {
  batch_topic = "${var.name}-batch-events.fifo"
}

resource "aws_sqs_queue" "batch_events" {
  name                      = "${var.name}-batch-events.fifo"
  fifo_queue                = true
  message_retention_seconds = 345600
  sqs_managed_sse_enabled   = true
}

resource "aws_sns_topic_subscription" "batch_events" {
  topic_arn            = module.gateway.notification_topic_arns[local.batch_topic]
  protocol             = "sqs"
  endpoint             = aws_sqs_queue.batch_events.arn
  raw_message_delivery = true
}

# SNS may send to the queue only from that topic ("Subscribing an Amazon SQS
# queue to an Amazon SNS topic": the queue policy allows sns.amazonaws.com
# sqs:SendMessage with aws:SourceArn the topic's ARN).
data "aws_iam_policy_document" "batch_events" {
  statement {
    sid       = "FromTheNotificationTopic"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.batch_events.arn]
    principals {
      type        = "Service"
      identifiers = ["sns.amazonaws.com"]
    }
    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [module.gateway.notification_topic_arns[local.batch_topic]]
    }
  }
}

resource "aws_sqs_queue_policy" "batch_events" {
  queue_url = aws_sqs_queue.batch_events.id
  policy    = data.aws_iam_policy_document.batch_events.json
}
