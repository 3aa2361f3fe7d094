output "function_url" {
  description = "The gateway's public base URL (the Function URL); every path under it reaches the gateway."
  value       = aws_lambda_function_url.gateway.function_url
}

output "function_name" {
  description = "The Lambda function's name."
  value       = aws_lambda_function.gateway.function_name
}

output "role_arn" {
  description = "The function's execution role."
  value       = aws_iam_role.gateway.arn
}

output "bucket_name" {
  description = "The S3 bucket of async records and results (AsyncStore=s3://<bucket>)."
  value       = aws_s3_bucket.results.bucket
}

output "queue_url" {
  description = "The continuation queue (AsyncQueue)."
  value       = aws_sqs_queue.continuations.url
}

output "dead_letter_queue_url" {
  description = "Where continuation messages go after max_receive_count deliveries."
  value       = aws_sqs_queue.dead_letters.url
}

output "result_retention_days" {
  description = "Days after which stored async data is deleted: AsyncTTLSecs in whole days, rounded up."
  value       = local.result_retention_days
}

output "environment" {
  description = "The environment the module writes (gateway settings that differ from the gateway's defaults, and the host's)."
  value       = local.app_settings
}

output "notification_topic_arns" {
  description = "The lifecycle notification SNS FIFO topics (the profiles' topics and notification_topics), by name: the function publishes to these only. Subscribe SQS queues to them."
  value       = { for name, t in aws_sns_topic.notifications : name => t.arn }
}

output "settings_source" {
  description = "With warm_settings: where the function reads them from (its SettingsSource): s3://<bucket>/settings.json, or appconfig:<name>/gateway/settings; null otherwise."
  value       = local.settings_source
}
