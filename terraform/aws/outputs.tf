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

output "notification_queue_urls" {
  description = "The lifecycle notification queues (the profiles' topics and notification_topics), by name: the function sends to these only."
  value       = { for name, q in aws_sqs_queue.notifications : name => q.url }
}
